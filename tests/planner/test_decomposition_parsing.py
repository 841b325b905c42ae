"""Plan parsing and validation: the three plan forms, their tolerances and strict errors."""

from __future__ import annotations

import json

import pytest

from planner.decomposition.dag import parse_plan, validate_plan
from planner.decomposition.errors import (
    CycleError,
    DuplicateTaskError,
    MissingStartError,
    PlanError,
    PlanParseError,
    SchemaVersionError,
    UnknownDependencyError,
)
from planner.decomposition.metrics import plan_metrics
from planner.decomposition.parsing import detect_form, read_plan

SEED_XML = """
<plan>
  <task>
    <id>1</id>
    <goal>Research background information on the topic</goal>
    <task_type>search</task_type>
    <dependency></dependency>
    <atom>true</atom>
  </task>
  <task>
    <id>2</id>
    <goal>Define key concepts and terminology</goal>
    <task_type>write</task_type>
    <dependency>1</dependency>
    <atom>true</atom>
  </task>
  <!-- Additional tasks... -->
</plan>
"""

SEED_PACK = {
    "schema_version": 2,
    "pack_id": "example-3",
    "start": "a",
    "nodes": {
        "a": {"type": "kernel", "task_id": "llm_boolean_gate", "version": "v1",
              "input": {"facts": {}, "question": "Is this feasible?"}, "depends_on": []},
        "b": {"type": "kernel", "task_id": "llm_enum_route", "version": "v1",
              "input": {"labels": ["path_a", "path_b"], "text": "choose"}, "depends_on": ["a"]},
        "c": {"type": "terminal", "depends_on": ["b"], "static_payload": {"done": True}},
    },
    "metadata": {"title": "Three-step pipeline"},
}


def xml(*tasks: str) -> str:
    return "<plan>" + "".join(f"<task>{t}</task>" for t in tasks) + "</plan>"


def xtask(tid: str, deps: str = "", atom: str | None = "true", task_type: str = "write") -> str:
    atom_tag = f"<atom>{atom}</atom>" if atom is not None else ""
    return (f"<id>{tid}</id><goal>goal {tid}</goal><task_type>{task_type}</task_type>"
            f"<dependency>{deps}</dependency>{atom_tag}")


# --- WriteHERE XML -------------------------------------------------------------------------


def test_xml_seed_plan_reads_ids_goals_deps_and_atoms() -> None:
    plan = parse_plan(SEED_XML)
    assert plan.form == "writehere_xml"
    assert [(t.id, t.task_type, t.deps, t.atomic) for t in plan.tasks] == [
        ("1", "search", (), True),
        ("2", "write", ("1",), True),
    ]
    assert plan.tasks[0].goal == "Research background information on the topic"


def test_xml_tolerates_wrong_case_fences_and_writehere_type_names() -> None:
    text = (
        "```xml\n<PLAN><Task><ID>1</ID><GOAL>a &amp; b</GOAL><TASK_TYPE>COMPOSITION</TASK_TYPE>"
        "<Dependency></Dependency><ATOM>TRUE</ATOM></Task>"
        "<task><id>2</id><goal>b</goal><task_type>Reasoning</task_type>"
        "<dependency> 1 </dependency><atom>False</atom></task></PLAN>\n```"
    )
    plan = parse_plan(text)
    assert [(t.id, t.task_type, t.atomic, t.deps) for t in plan.tasks] == [
        ("1", "write", True, ()),
        ("2", "think", False, ("1",)),
    ]
    assert plan.tasks[0].goal == "a & b"


def test_xml_missing_atom_means_not_atomic() -> None:
    plan = parse_plan(xml(xtask("1", atom=None)))
    assert plan.tasks[0].atomic is False
    assert plan.tasks[0].worker == "write"


def test_xml_dependency_list_accepts_commas_semicolons_and_spaces() -> None:
    plan = parse_plan(xml(xtask("1"), xtask("2"), xtask("3", deps="1, 2"), xtask("4", "1;2 3")))
    assert plan.tasks[2].deps == ("1", "2")
    assert plan.tasks[3].deps == ("1", "2", "3")


def test_xml_empty_plan_is_allowed_and_means_atomic() -> None:
    assert parse_plan("<plan></plan>").tasks == ()


def test_xml_task_without_goal_is_an_error_naming_the_task() -> None:
    with pytest.raises(PlanParseError, match=r"task '2' has no <goal>"):
        parse_plan(xml(xtask("1"), "<id>2</id><task_type>write</task_type>"))


def test_xml_task_without_id_is_an_error_naming_its_position() -> None:
    with pytest.raises(PlanParseError, match=r"<task> #2 has no <id>"):
        parse_plan(xml(xtask("1"), "<goal>x</goal><task_type>write</task_type>"))


def test_xml_duplicate_ids_are_rejected() -> None:
    with pytest.raises(DuplicateTaskError, match=r"duplicate task id '1'"):
        parse_plan(xml(xtask("1"), xtask("1")))


def test_xml_cycle_is_rejected_with_its_path() -> None:
    with pytest.raises(CycleError) as info:
        parse_plan(xml(xtask("1", "3"), xtask("2", "1"), xtask("3", "2")))
    assert info.value.path == ["1", "3", "2", "1"]
    assert "1 → 3 → 2 → 1" in str(info.value)


def test_self_dependency_is_a_cycle() -> None:
    with pytest.raises(CycleError, match="2 → 2"):
        parse_plan(xml(xtask("1"), xtask("2", "2")))


def test_unknown_dependency_errors_by_default_and_names_known_ids() -> None:
    expected = r"task '2' .* unknown task '9'; known ids: 1, 2"
    with pytest.raises(UnknownDependencyError, match=expected):
        parse_plan(xml(xtask("1"), xtask("2", "1,9")))


def test_unknown_dependency_can_be_dropped_by_policy() -> None:
    plan, dropped = validate_plan(read_plan(xml(xtask("1"), xtask("2", "1,9"))),
                                  unknown_dependencies="drop")
    assert plan.tasks[1].deps == ("1",)
    assert dropped == ["2->9"]


def test_text_without_any_plan_is_a_parse_error_not_a_key_error() -> None:
    bad_pack = '{"schema_version": 2, "start": "a", "nodes": {"a": {"depends_on": {"x": 1}}}}'
    for bad in ("", "   ", "I cannot help with that", "<<not valid output>>", "42", "[1]",
                '{"draft_pack": 3}', bad_pack, '{"schema_version": 2, "nodes": [], "start": 1}'):
        with pytest.raises(PlanError) as info:
            parse_plan(bad)
        assert not isinstance(info.value, KeyError)


# --- WriteHERE JSON ------------------------------------------------------------------------


def test_json_in_result_tag_with_nested_subtasks_and_numeric_ids() -> None:
    body = {
        "id": "", "goal": "write a report", "dependency": [],
        "sub_tasks": [
            {"id": 1, "task_type": "search", "goal": "find facts", "dependency": []},
            {"id": 2, "task_type": "write", "goal": "draft", "dependency": [1],
             "sub_tasks": [
                 {"id": 1, "task_type": "write", "goal": "intro", "dependency": []},
                 {"id": 2, "task_type": "write", "goal": "body", "dependency": "1"},
             ]},
            {"id": 3, "task_type": "think", "goal": "review", "dependency": [2], "atom": False},
        ],
    }
    plan = parse_plan(f"Here you go:\n<result>\n{json.dumps(body)}\n</result>")
    assert plan.form == "writehere_json"
    first, draft, review = plan.tasks
    assert (first.id, first.atomic) == ("1", True)  # a leaf that does not say is atomic
    assert (draft.id, draft.atomic, draft.deps) == ("2", False, ("1",))
    assert [(s.id, s.deps) for s in draft.subtasks] == [("1", ()), ("2", ("1",))]
    assert review.atomic is False  # an explicit "atom": false is honoured


def test_json_fenced_list_form_is_accepted() -> None:
    text = '```json\n[{"id": "a", "task_type": "WRITE", "goal": "x", "atom": true}]\n```'
    plan = parse_plan(text)
    assert [(t.id, t.task_type) for t in plan.tasks] == [("a", "write")]


def test_json_invalid_text_reports_the_position() -> None:
    with pytest.raises(PlanParseError, match=r"not valid JSON .* line 1 column"):
        parse_plan('<result>{"sub_tasks": [</result>')


def test_json_without_sub_tasks_is_an_error() -> None:
    with pytest.raises(PlanParseError, match="no 'sub_tasks'"):
        parse_plan('<result>{"goal": "x"}</result>')


def test_json_duplicate_ids_in_a_nested_level_name_that_level() -> None:
    body = {"sub_tasks": [{"id": 1, "task_type": "write", "goal": "a", "sub_tasks": [
        {"id": 1, "task_type": "write", "goal": "x"},
        {"id": 1, "task_type": "write", "goal": "y"},
    ]}]}
    with pytest.raises(DuplicateTaskError, match=r"sub_tasks of '1'"):
        parse_plan(f"<result>{json.dumps(body)}</result>")


def test_json_cycle_is_rejected() -> None:
    body = {"sub_tasks": [
        {"id": 1, "task_type": "write", "goal": "a", "dependency": [2]},
        {"id": 2, "task_type": "write", "goal": "b", "dependency": [1]},
    ]}
    with pytest.raises(CycleError, match="1 → 2 → 1"):
        parse_plan(f"<result>{json.dumps(body)}</result>")


def test_json_task_without_type_says_which_types_to_use() -> None:
    with pytest.raises(PlanParseError, match=r"task '1' has no task_type"):
        parse_plan('<result>{"sub_tasks": [{"id": 1, "goal": "a"}]}</result>')


# --- forge-lcdl decision pack --------------------------------------------------------------


@pytest.mark.parametrize("wrapped", [False, True])
def test_pack_seed_example_raw_or_wrapped(wrapped: bool) -> None:
    payload = {"draft_pack": SEED_PACK} if wrapped else SEED_PACK
    plan = parse_plan(json.dumps(payload))
    assert plan.form == "lcdl_pack"
    assert plan.start == "a"
    a, b, c = plan.tasks
    assert (a.worker, a.task_type, a.deps, a.atomic) == ("llm_boolean_gate", "kernel", (), True)
    assert b.deps == ("a",)
    assert (c.worker, c.task_type, dict(c.input)) == ("lcdl.terminal", "terminal", {"done": True})
    assert a.goal == "Is this feasible?"


def test_pack_dict_is_accepted_without_text() -> None:
    assert detect_form(SEED_PACK) == "lcdl_pack"
    assert len(parse_plan(SEED_PACK).tasks) == 3


def test_pack_tolerates_missing_depends_on_case_numeric_ids_and_merges_static_payload() -> None:
    pack = {
        "schema_version": "2", "start": "1",
        "nodes": {
            "1": {"type": "KERNEL", "input": {"goal": "g", "x": 1}, "static_payload": {"y": 2}},
            "2": {"type": "rank", "task_id": "ranker", "depends_on": [1]},
        },
        "metadata": {"default_task_id": "think"},
    }
    one, two = parse_plan(pack).tasks
    assert one.deps == () and one.worker == "think"  # from metadata.default_task_id
    assert dict(one.input) == {"goal": "g", "x": 1, "y": 2}
    assert (two.deps, two.worker) == (("1",), "ranker")


def test_pack_invoke_pack_node_is_planned_again() -> None:
    pack = {"schema_version": 2, "start": "a",
            "nodes": {"a": {"type": "invoke_pack", "input": {"goal": "sub pack"}}}}
    (node,) = parse_plan(pack).tasks
    assert node.atomic is False


@pytest.mark.parametrize("version", [1, 3, None, "two"])
def test_pack_wrong_schema_version_is_rejected(version: object) -> None:
    pack = {**SEED_PACK, "schema_version": version}
    with pytest.raises(SchemaVersionError, match=r"must say schema_version 2"):
        parse_plan(pack)


def test_pack_without_start_is_rejected_naming_the_nodes() -> None:
    pack = {k: v for k, v in SEED_PACK.items() if k != "start"}
    with pytest.raises(MissingStartError, match=r"no 'start' node; set it to one of: a, b, c"):
        parse_plan(pack)


def test_pack_start_that_is_not_a_node_is_rejected() -> None:
    with pytest.raises(MissingStartError, match=r"start node 'z' is not in the pack"):
        parse_plan({**SEED_PACK, "start": "z"})


def test_pack_duplicate_node_ids_in_the_text_are_rejected() -> None:
    text = ('{"schema_version": 2, "start": "a", "nodes": {"a": {"type": "kernel"}, '
            '"a": {"type": "terminal"}}}')
    with pytest.raises(DuplicateTaskError, match=r"duplicate node id 'a'"):
        parse_plan(text)


def test_pack_unknown_node_type_names_the_allowed_ones() -> None:
    pack = {"schema_version": 2, "start": "a", "nodes": {"a": {"type": "banana"}}}
    with pytest.raises(PlanParseError, match="kernel, rank, invoke_pack, terminal"):
        parse_plan(pack)


def test_pack_unknown_dependency_and_cycle_are_rejected() -> None:
    bad_dep = {"schema_version": 2, "start": "a", "nodes": {"a": {"depends_on": ["q"]}}}
    with pytest.raises(UnknownDependencyError, match="unknown task 'q'"):
        parse_plan(bad_dep)
    cyc = {"schema_version": 2, "start": "a",
           "nodes": {"a": {"depends_on": ["b"]}, "b": {"depends_on": ["a"]}}}
    with pytest.raises(CycleError, match="a → b → a"):
        parse_plan(cyc)


def test_slot_reference_adds_a_dependency_and_must_name_a_known_task() -> None:
    pack = {"schema_version": 2, "start": "a", "nodes": {
        "a": {"task_id": "think"},
        "b": {"task_id": "write", "input": {"facts": {"from_sub_goal": "a", "slot": "text"}}},
    }}
    assert parse_plan(pack).tasks[1].deps == ("a",)
    pack["nodes"]["b"]["input"]["facts"]["from_sub_goal"] = "zz"
    with pytest.raises(UnknownDependencyError, match="unknown task 'zz'"):
        parse_plan(pack)


# --- metrics -------------------------------------------------------------------------------


def test_plan_metrics_describe_size_types_dependencies_depth_and_atomic_share() -> None:
    plan = parse_plan(xml(xtask("1", task_type="search"), xtask("2", "1"),
                          xtask("3", "1,2", atom="false"), xtask("4")))
    m = plan_metrics(plan.tasks, task_id="root", form=plan.form, parse_retries=1)
    assert m["task_count"] == 4
    assert m["task_types"] == {"search": 1, "write": 3}
    assert m["dependency_histogram"] == {"0": 2, "1": 1, "2": 1}
    assert m["depth"] == 3  # 1 -> 2 -> 3
    assert m["atomic_share"] == 0.75
    assert (m["cycles_found"], m["parse_retries"], m["ok"]) == (0, 1, True)
    json.dumps(m)  # metrics live in graph state: plain JSON only


def test_plan_metrics_count_cycles_of_an_unvalidated_plan() -> None:
    raw = read_plan(xml(xtask("1", "2"), xtask("2", "1")))
    m = plan_metrics(raw.tasks, task_id="root", form=raw.form, error="cycle")
    assert m["cycles_found"] == 1
    assert m["cycles"] == [["1", "2", "1"]]
    assert m["ok"] is False

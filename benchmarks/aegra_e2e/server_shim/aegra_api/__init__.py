"""A shim of Aegra's server package, for the e2e harness only (run.sh puts it on the
server's path): Aegra's example custom routes (examples/custom_routes_example.py) import
its auth helpers, ``aegra_api.core.auth_deps.require_auth`` and ``aegra_api.models.auth.User``."""

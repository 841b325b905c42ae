// What the test page imports: the official client, as Agent Chat UI's pages use it.
export { Client } from "@langchain/langgraph-sdk";

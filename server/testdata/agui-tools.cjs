// The npm AG-UI client (@ag-ui/client) with a front-end tool: the first
// run hands the tool's call back (its TOOL_CALL events), the client runs
// it here, adds the tool message and runs again, and the agent answers
// from the result. It prints what it got as one JSON line for the Go test.
//
//   node agui-tools.cjs URL
// with NODE_PATH naming the node_modules that hold "@ag-ui/client".
const { HttpAgent } = require("@ag-ui/client");

const tools = [
  {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];

async function main() {
  const [url] = process.argv.slice(2);
  const agent = new HttpAgent({ url, threadId: "thread-tools" });
  agent.messages = [{ id: "u1", role: "user", content: "Sum 2 and 3, and the weather in Oslo?" }];
  const out = { calls: [], outcomes: [] };
  const subscriber = {
    onToolCallEndEvent({ toolCallName, toolCallArgs }) {
      out.calls.push(`${toolCallName}${JSON.stringify(toolCallArgs)}`);
    },
    onRunFinishedEvent({ event }) {
      out.outcomes.push(event.outcome ? event.outcome.type : "none");
      out.result = event.result;
    },
  };
  await agent.runAgent({ runId: "run-1", tools }, subscriber);
  const asked = agent.messages.filter((m) => m.role === "assistant" && m.toolCalls).flatMap((m) => m.toolCalls);
  const weather = asked.find((c) => c.function.name === "get_weather");
  const { city } = JSON.parse(weather.function.arguments);
  agent.messages.push({ id: "t1", role: "tool", toolCallId: weather.id, content: `sunny in ${city}` });
  await agent.runAgent({ runId: "run-2", tools }, subscriber);
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

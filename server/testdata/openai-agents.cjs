// The OpenAI Agents SDK for JS (@openai/agents) on its default model, the
// Responses API, pointed at agentry (OPENAI_BASE_URL): an agent whose
// model is an agentry agent runs twice, the second run going on from the
// first (previousResponseId), streamed too. It prints what it got as one
// JSON line for the Go test to check.
//
//   OPENAI_BASE_URL=URL OPENAI_API_KEY=KEY node openai-agents.cjs MODEL
// with NODE_PATH naming the node_modules that hold "@openai/agents".
const { Agent, run, setTracingDisabled } = require("@openai/agents");

async function main() {
  const [model] = process.argv.slice(2);
  setTracingDisabled(true); // nothing leaves for OpenAI's trace exporter
  const agent = new Agent({ name: "Assistant", model });
  const out = {};
  const first = await run(agent, "My name is Ada.");
  const second = await run(agent, "What is my name?", { previousResponseId: first.lastResponseId });
  out.first = first.finalOutput;
  out.second = second.finalOutput;
  const streamed = await run(agent, "And again?", { previousResponseId: second.lastResponseId, stream: true });
  out.streamed = "";
  for await (const text of streamed.toTextStream()) out.streamed += text;
  await streamed.completed;
  out.final = streamed.finalOutput;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

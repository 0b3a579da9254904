// The OpenAI Agents SDK for JS (@openai/agents) on its default model, the
// Responses API, pointed at agentry (OPENAI_BASE_URL), with a function
// tool of its own: agentry's agent hands the tool's call back, the SDK
// runs it here and sends its output, and the run goes on to its answer;
// the SDK sends the agent's instructions with every request, chained too.
// Once as the SDK sends a run by default (the whole input each time),
// once chained by previousResponseId, once streamed. It prints what it
// got as one JSON line for the Go test to check.
//
//   OPENAI_BASE_URL=URL OPENAI_API_KEY=KEY node openai-agents-tools.cjs MODEL
// with NODE_PATH naming the node_modules that hold "@openai/agents".
const { Agent, run, tool, setTracingDisabled } = require("@openai/agents");

async function main() {
  const [model] = process.argv.slice(2);
  setTracingDisabled(true); // nothing leaves for OpenAI's trace exporter
  const cities = [];
  const getWeather = tool({
    name: "get_weather",
    description: "The weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
    strict: true,
    execute: async ({ city }) => {
      cities.push(city);
      return `sunny in ${city}`;
    },
  });
  const agent = new Agent({ name: "Forecaster", instructions: "Be brief.", model, tools: [getWeather] });
  const out = {};
  const plain = await run(agent, "Sum 2 and 3, and the weather in Oslo?");
  out.plain = plain.finalOutput;
  const chained = await run(agent, "And again?", { previousResponseId: plain.lastResponseId });
  out.chained = chained.finalOutput;
  const streamed = await run(agent, "Once more?", { stream: true });
  for await (const _ of streamed) {
  }
  await streamed.completed;
  out.streamed = streamed.finalOutput;
  out.cities = cities;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

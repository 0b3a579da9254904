// The Vercel AI SDK (ai, with @ai-sdk/openai-compatible) sends a chat of
// several messages to agentry's chat completions, generated and streamed,
// and prints the answers as one JSON line for the Go test to check.
//
//   node ai-sdk-history.cjs BASE_URL MODEL
// with NODE_PATH naming the node_modules that hold them.
const { generateText, streamText } = require("ai");
const { createOpenAICompatible } = require("@ai-sdk/openai-compatible");

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const provider = createOpenAICompatible({ name: "agentry", baseURL, apiKey: "none" });
  const messages = [
    { role: "user", content: "My name is Ada." },
    { role: "assistant", content: "Hello, Ada." },
    { role: "user", content: "What is my name?" },
  ];
  const out = {};
  out.generated = (await generateText({ model: provider(model), messages, maxRetries: 0 })).text;
  const s = streamText({ model: provider(model), messages, maxRetries: 0, onError: ({ error }) => { out.error = String(error); } });
  out.streamed = "";
  for await (const part of s.textStream) out.streamed += part;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

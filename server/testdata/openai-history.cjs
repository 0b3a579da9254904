// The npm "openai" client sends a chat with its history (a user's words,
// an answer, a tool call and its result) to agentry's chat completions,
// streamed and not, and a request with client tools, which is refused.
// It prints what it got as one JSON line for the Go test to check.
//
//   node openai-history.cjs BASE_URL MODEL
// with NODE_PATH naming the node_modules that hold "openai".
const OpenAI = require("openai");

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
  const messages = [
    { role: "user", content: "My name is Ada." },
    { role: "assistant", content: "Hello, Ada." },
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"Ada"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: "Ada Lovelace, 1815" },
    { role: "user", content: [{ type: "text", text: "What is my name?" }] },
  ];
  const out = {};
  const c = await client.chat.completions.create({ model, messages });
  out.content = c.choices[0].message.content;
  const stream = await client.chat.completions.create({ model, messages, stream: true });
  out.streamed = "";
  for await (const chunk of stream) {
    for (const ch of chunk.choices) if (ch.delta && ch.delta.content) out.streamed += ch.delta.content;
  }
  try {
    await client.chat.completions.create({ model, messages, tools: [{ type: "function", function: { name: "search", parameters: { type: "object" } } }] });
  } catch (e) {
    out.refused = { status: e.status, param: e.param };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

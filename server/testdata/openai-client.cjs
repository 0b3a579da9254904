// The npm "openai" client against agentry's OpenAI-compatible endpoint:
// one call, one streamed call, the models. It prints what it got as one
// JSON line for the Go test to check.
//
//   node openai-client.cjs BASE_URL KEY MODEL MESSAGE
// with NODE_PATH naming the node_modules that hold "openai".
const OpenAI = require("openai");

async function main() {
  const [baseURL, apiKey, model, message] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages = [{ role: "user", content: message }];
  const out = {};
  const c = await client.chat.completions.create({ model, messages });
  out.content = c.choices[0].message.content;
  out.finish = c.choices[0].finish_reason;
  out.usage = c.usage;
  const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } });
  out.streamed = "";
  out.chunks = 0;
  for await (const chunk of stream) {
    out.chunks++;
    if (chunk.usage) out.streamedUsage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.delta && ch.delta.content) out.streamed += ch.delta.content;
      if (ch.finish_reason) out.streamedFinish = ch.finish_reason;
    }
  }
  out.models = (await client.models.list()).data.map((m) => m.id);
  try {
    await client.chat.completions.create({ model: "nobody", messages });
  } catch (e) {
    out.error = { status: e.status, code: e.code };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

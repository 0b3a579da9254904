// The npm "openai" client's Responses API against agentry: a response,
// one that goes on from it, retrieved, streamed (responses.stream), one in
// the background cancelled, and one deleted. It prints what it got as one
// JSON line for the Go test to check.
//
//   node openai-responses.cjs BASE_URL MODEL SLOW_MODEL
// with NODE_PATH naming the node_modules that hold "openai".
const OpenAI = require("openai");

async function main() {
  const [baseURL, model, slow] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
  const out = {};
  const first = await client.responses.create({ model, input: "My name is Ada." });
  const second = await client.responses.create({ model, input: "What is my name?", previous_response_id: first.id });
  out.second = second.output_text;
  out.conversations = [first.conversation && first.conversation.id, second.conversation && second.conversation.id];
  out.retrieved = (await client.responses.retrieve(second.id)).output_text;
  const stream = client.responses.stream({ model, input: "What is my name?", previous_response_id: second.id });
  out.events = [];
  for await (const e of stream) out.events.push(e.type);
  // finalResponse() leaves output_text to the caller: its message is read.
  const fin = await stream.finalResponse();
  out.streamed = fin.output.filter((o) => o.type === "message").flatMap((o) => o.content).map((c) => c.text).join("");
  const background = await client.responses.create({ model: slow, input: "wait", background: true });
  out.background = background.status;
  out.cancelled = (await client.responses.cancel(background.id)).status;
  const lone = await client.responses.create({ model, input: "Forget me." });
  await client.responses.delete(lone.id);
  try {
    await client.responses.retrieve(lone.id);
  } catch (e) {
    out.deleted = e.status;
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

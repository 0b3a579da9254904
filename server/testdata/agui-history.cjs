// The npm AG-UI client (@ag-ui/client) starts a thread with a history of
// its own (a user's words, an answer), asks, then asks again on the same
// thread, and prints the answers as one JSON line for the Go test.
//
//   node agui-history.cjs URL
// with NODE_PATH naming the node_modules that hold "@ag-ui/client".
const { HttpAgent } = require("@ag-ui/client");

async function ask(agent, runId) {
  let result;
  await agent.runAgent({ runId }, {
    onRunFinishedEvent({ result: r }) {
      result = r;
    },
  });
  return result;
}

async function main() {
  const [url] = process.argv.slice(2);
  const agent = new HttpAgent({ url, threadId: "thread-history" });
  agent.messages = [
    { id: "u1", role: "user", content: "My name is Ada." },
    { id: "a1", role: "assistant", content: "Hello, Ada." },
    { id: "u2", role: "user", content: "What is my name?" },
  ];
  const out = { answers: [] };
  out.answers.push(await ask(agent, "run-1"));
  agent.messages.push({ id: "u3", role: "user", content: "And again?" });
  out.answers.push(await ask(agent, "run-2"));
  out.roles = agent.messages.map((m) => m.role);
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

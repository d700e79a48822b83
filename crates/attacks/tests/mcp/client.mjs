// A real MCP client (the official TypeScript SDK, @modelcontextprotocol/sdk) for
// crates/attacks/tests/mcp_server.rs: connects to `stockade mcp` over stdio or streamable HTTP,
// lists the tools, makes the calls the test gives (one after the other, or all at once) and
// prints one JSON object: {"tools": [...], "results": [...]} (a failed call: {"thrown": msg}).
//
//   node client.mjs SDK_DIR CONFIG_JSON
//   CONFIG_JSON: {"transport": "stdio", "command": "...", "args": [...], "env": {...}}
//             or {"transport": "http", "url": "http://127.0.0.1:PORT/mcp", "token": "..."}
//             plus "calls": [{"name": ..., "arguments": {...}}], "concurrent": bool
import { pathToFileURL } from "node:url";

const [sdk, configText] = process.argv.slice(2);
const config = JSON.parse(configText);
const load = (p) => import(pathToFileURL(`${sdk}/dist/esm/${p}`).href);
const { Client } = await load("client/index.js");

let transport;
if (config.transport === "stdio") {
  const { StdioClientTransport } = await load("client/stdio.js");
  transport = new StdioClientTransport({
    command: config.command,
    args: config.args,
    env: config.env,
    stderr: "inherit",
  });
} else {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(config.url), {
    requestInit: { headers },
  });
}

const client = new Client({ name: "stockade-test", version: "1.0.0" });
const out = { tools: [], results: [] };
try {
  await client.connect(transport);
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => t.name);
  const call = async (c) => {
    try {
      return await client.callTool({ name: c.name, arguments: c.arguments });
    } catch (e) {
      return { thrown: String(e && e.message ? e.message : e) };
    }
  };
  const calls = config.calls || [];
  if (config.concurrent) {
    out.results = await Promise.all(calls.map(call));
  } else {
    for (const c of calls) out.results.push(await call(c));
  }
} catch (e) {
  out.error = String(e && e.message ? e.message : e);
}
try {
  await client.close();
} catch (e) {}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);

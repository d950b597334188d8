// /api/svc/mcp: the service as an MCP server (Streamable HTTP), for AI agents. Registered in the
// API-key scope like every REST route, so the key, the rate limit and its headers, the body
// limit, the error envelope and the request log are the API's own.
//
// Stateless: each POST gets its own MCP server and transport, made for the key's organization
// and dropped with the answer. No session is kept, so any api process can answer any request
// (no affinity behind a load balancer), nothing is held between requests, and every request is
// authenticated and counted on its own. Answers are plain JSON (no SSE stream): every tool
// answers once, and the service sends no requests or notifications of its own.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Type } from 'typebox';
import type { Principal } from '../../domain/authenticator.ts';
import type { Deps } from '../../domain/deps.ts';
import { AppError } from '../../lib/errors.ts';
import { errorResponses } from '../../schemas/common.ts';
import { type App, principalOf } from '../types.ts';
import { otherTools } from './other-tools.ts';
import { taskTools } from './task-tools.ts';
import { callTool, definitionOf, type Tool, toolError } from './tool-kit.ts';

const TOOLS: Tool[] = [...taskTools, ...otherTools];
const BY_NAME = new Map(TOOLS.map((tool) => [tool.name, tool]));
const DEFINITIONS = TOOLS.map(definitionOf);

const INSTRUCTIONS =
  'Scheduled AI tasks of one organization (the API key decides which): a task runs a prompt on a model on its schedule and sends each result to its destinations. ' +
  'Money is in cents (USD), times are ISO 8601 in UTC, timezones are IANA names. ' +
  'To see what a schedule means, call preview_schedule before create_task; after run_task_now, poll get_run until the run is completed or failed.';

/** The MCP server for one request, acting for the key's organization only. */
function serverFor(deps: Deps, principal: Principal): Server {
  const server = new Server(
    { name: 'scheduled-ai-task-service', version: '0.1.0' },
    { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: DEFINITIONS }));
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    const tool = BY_NAME.get(request.params.name);
    if (!tool) return toolError(new AppError('not_found', `No tool named ${request.params.name}`));
    return callTool({ deps, principal }, tool, request.params.arguments);
  });
  return server;
}

/** One JSON-RPC message per request (no batch), so each tool call is counted by the rate limit. */
const McpMessage = Type.Object(
  { jsonrpc: Type.Literal('2.0'), method: Type.Optional(Type.String({ maxLength: 200 })) },
  { additionalProperties: true, description: 'One JSON-RPC 2.0 message of the Model Context Protocol' },
);

/** The headers the transport reads; the answer is always JSON, whatever the client accepts. */
function transportHeaders(headers: Record<string, string | string[] | undefined>): Headers {
  const out = new Headers({
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
  });
  const version = headers['mcp-protocol-version'];
  if (typeof version === 'string') out.set('mcp-protocol-version', version);
  return out;
}

/** What the transport refuses (not a JSON-RPC message, ...) answered in the API's envelope. */
async function refusal(response: Response): Promise<AppError> {
  let message = response.statusText;
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    message = body.error?.message ?? message;
  } catch {
    // not JSON: the status text stays the message
  }
  if (response.status === 415)
    return new AppError('unsupported_media_type', `Not a valid MCP request: ${message}`);
  return new AppError('validation_error', `Not a valid MCP request: ${message}`, {
    details: [{ path: '/body', message: `is not a valid MCP message (${message})` }],
  });
}

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function mcpRoutes(app: App, deps: Deps): void {
  app.post(
    '/mcp',
    {
      schema: {
        operationId: 'callMcp',
        tags: ['mcp'],
        summary: 'The MCP server (Streamable HTTP, stateless, JSON answers) for AI agents; see docs/mcp.md',
        description:
          'One JSON-RPC message of the Model Context Protocol per request (initialize, tools/list, tools/call, notifications), authenticated with the API key and acting for its organization; answers are JSON, never a stream. The tools and their arguments are listed by tools/list and in docs/mcp.md.',
        body: McpMessage,
        response: {
          200: Type.Object({}, { additionalProperties: true, description: 'The JSON-RPC answer' }),
          202: Type.Null({ description: 'A notification or answer accepted (no body)' }),
          ...errorResponses(400, 401, 413, 415, 429),
        },
      },
    },
    async (request, reply) => {
      const server = serverFor(deps, principalOf(request));
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      try {
        await server.connect(transport);
        const response = await transport.handleRequest(
          new Request(new URL(request.url, 'http://mcp.invalid'), {
            method: 'POST',
            headers: transportHeaders(request.headers),
          }),
          { parsedBody: request.body },
        );
        if (response.status >= 400) throw await refusal(response);
        const text = await response.text();
        // The transport answers 200 (a result) or 202 (a notification, no body).
        reply.code(response.status as 200);
        // No body at all (a JSON `null` would be one); the schema types it as null.
        if (!text) return reply.send(undefined as unknown as null);
        return reply.type('application/json; charset=utf-8').send(text as unknown as object);
      } finally {
        await server.close();
      }
    },
  );

  // No server-sent stream and no session to end: GET and DELETE are refused as MCP asks of a
  // stateless server, by the API's 405 for a known path (with Allow: POST), not by routes.
}

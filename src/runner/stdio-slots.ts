// Stdio MCP servers are processes on the service's machine: how many run at once is bounded
// per process and per organization, so that one organization's runs and tests cannot fill
// the machine with them.
import type { Config } from '../config.ts';
import type { ConnectResult } from './tools/types.ts';

type SlotConfig = Pick<Config, 'maxStdioProcesses' | 'orgCaps'>;

class StdioSlots {
  total = 0;
  readonly perOrganization = new Map<string, number>();

  /** Takes a slot, or says which bound is full. */
  take(
    config: SlotConfig,
    organizationId: string,
  ): { ok: true; release: () => void } | { ok: false; message: string } {
    const mine = this.perOrganization.get(organizationId) ?? 0;
    if (mine >= config.orgCaps.stdioProcesses) {
      return {
        ok: false,
        message: `this organization already runs ${mine} stdio servers, the most allowed at once; retry when a run or test has finished`,
      };
    }
    if (this.total >= config.maxStdioProcesses) {
      return {
        ok: false,
        message: 'the service runs as many stdio servers as it allows at once; retry shortly',
      };
    }
    this.total++;
    this.perOrganization.set(organizationId, mine + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.perOrganization.get(organizationId) ?? 1) - 1;
        if (left > 0) this.perOrganization.set(organizationId, left);
        else this.perOrganization.delete(organizationId);
      },
    };
  }
}

// One count per configuration, that is per service: tests start several in one process.
const slotsByConfig = new WeakMap<SlotConfig, StdioSlots>();

/** Whether connecting this source starts a process. */
export function startsProcess(source: {
  type: string;
  config: { transport?: string; command?: string };
}): boolean {
  if (source.type !== 'mcp') return false;
  return (source.config.transport ?? (source.config.command !== undefined ? 'stdio' : 'http')) === 'stdio';
}

/**
 * Connects through `connect` holding a stdio slot of the organization until the connection is
 * closed (or the attempt fails). When no slot is free the source is refused, as a value.
 */
export async function withStdioSlot(
  config: SlotConfig,
  organizationId: string,
  sourceName: string,
  connect: () => Promise<ConnectResult>,
): Promise<ConnectResult> {
  let slots = slotsByConfig.get(config);
  if (!slots) {
    slots = new StdioSlots();
    slotsByConfig.set(config, slots);
  }
  const slot = slots.take(config, organizationId);
  if (!slot.ok)
    return { ok: false, errorType: 'refused', message: `source "${sourceName}": ${slot.message}` };
  let result: ConnectResult;
  try {
    result = await connect();
  } catch (err) {
    slot.release();
    throw err;
  }
  if (!result.ok) {
    slot.release();
    return result;
  }
  const connection = result.connection;
  return {
    ok: true,
    connection: {
      tools: connection.tools,
      call: (name, args, signal) => connection.call(name, args, signal),
      close: async () => {
        try {
          await connection.close();
        } finally {
          slot.release();
        }
      },
    },
  };
}

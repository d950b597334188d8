// Overview (usage and statistics, with a chart of runs and cost per day) and billing (plan,
// upgrade through Stripe Checkout, manage the subscription in Stripe's portal).
import type { FastifyReply } from 'fastify';
import { createCheckoutSession, createPortalSession } from '../../billing/sessions.ts';
import { billingStatus } from '../../domain/billing.ts';
import type { Deps } from '../../domain/deps.ts';
import { type DayOfUsage, lastDaysOfUsage, organizationStatistics } from '../../domain/stats.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { viewerOf } from '../auth.ts';
import { type Html, html, raw } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import type { WebScope } from '../plugin.ts';

const DAYS = 30;
const dollars = (cents: number) => `$${(cents / 100).toFixed(cents !== 0 && Math.abs(cents) < 100 ? 4 : 2)}`;
const card = (label: string, value: string | number) =>
  html`<div class="card"><div class="muted">${label}</div><div class="n">${value}</div></div>`;

/** Bars of runs per day and a line of cost, as an SVG with a text alternative (the table). */
function usageChart(days: DayOfUsage[]): Html {
  const w = 720; // svg.chart's max-width in layout.ts
  const h = 180;
  const pad = 24;
  const maxRuns = Math.max(1, ...days.map((d) => d.runs));
  const maxCost = Math.max(0.0001, ...days.map((d) => d.costCents));
  const step = (w - 2 * pad) / days.length;
  const bars = days
    .map((d, i) => {
      const bh = ((h - 2 * pad) * d.runs) / maxRuns;
      return `<rect x="${(pad + i * step + 1).toFixed(1)}" y="${(h - pad - bh).toFixed(1)}" width="${Math.max(1, step - 2).toFixed(1)}" height="${bh.toFixed(1)}" fill="currentColor" opacity="0.35"/>`;
    })
    .join('');
  const line = days
    .map(
      (d, i) =>
        `${(pad + i * step + step / 2).toFixed(1)},${(h - pad - ((h - 2 * pad) * d.costCents) / maxCost).toFixed(1)}`,
    )
    .join(' ');
  return html`<figure>
<svg viewBox="0 0 ${w} ${h}" width="100%" role="img" aria-labelledby="chart-title" class="chart">
<title id="chart-title">Runs (bars, up to ${maxRuns} a day) and cost (line, up to ${dollars(maxCost)} a day) over the last ${DAYS} days</title>
${raw(bars)}<polyline points="${line}" fill="none" stroke="var(--warn)" stroke-width="2"/>
<line x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}" stroke="var(--line)"/></svg>
<figcaption class="muted">Runs per day (bars) and cost per day (line), last ${DAYS} days, UTC.</figcaption>
<details><summary>Data</summary><div class="table-wrap"><table><thead><tr><th scope="col">Day</th><th scope="col">Runs</th><th scope="col">Cost</th></tr></thead><tbody>
${days.filter((d) => d.runs > 0).map((d) => html`<tr><td>${d.day}</td><td>${d.runs}</td><td>${dollars(d.costCents)}</td></tr>`)}
</tbody></table></div></details></figure>`;
}

const send = (reply: FastifyReply, status: number, markup: string) =>
  reply.code(status).type('text/html; charset=utf-8').send(markup);

async function billingPage(deps: Deps, viewer: Viewer, flash?: { kind: 'ok' | 'error'; text: string }) {
  const s = await billingStatus(deps, viewer.organizationId);
  return page(
    { title: 'Billing', viewer, section: '/dashboard/billing', flash },
    html`<h1>Billing</h1>
<div class="cards">${card('Plan', s.plan ?? '')}${card('Runs this period', `${s.runsUsed} / ${s.runsLimit ?? '∞'}`)}
${card('Active tasks', `${s.tasksCount} / ${s.tasksLimit}`)}${card('Members', `${s.usersCount ?? 0} / ${s.usersLimit}`)}
${card('Usage beyond credits', dollars(s.usageCostCents ?? 0))}${card('Credits included', dollars(s.usageCreditsCents ?? 0))}</div>
<p class="muted">The current period started ${s.billingPeriodStart?.slice(0, 10)}.</p>
${
  s.runsLimitReachedAt
    ? html`<p class="flash error" role="status">The plan's limit of ${s.runsLimit ?? ''} runs was reached on ${s.runsLimitReachedAt.slice(0, 10)}: until the next period, scheduled slots are skipped (no run, no delivery) and Run now is refused. Upgrade the plan to run again this period.</p>`
    : ''
}
<div class="row">
${s.plan === 'free' || !s.paymentSubscriptionId ? html`<form method="post" action="/dashboard/billing/checkout">${csrfField(viewer.csrfToken)}<button type="submit">Upgrade to paid</button></form>` : ''}
${s.paymentCustomerId ? html`<form method="post" action="/dashboard/billing/portal">${csrfField(viewer.csrfToken)}<button class="secondary" type="submit">Manage subscription</button></form>` : ''}
</div>`,
  );
}

export function billingPages(scope: WebScope, deps: Deps): void {
  scope.get('/dashboard', async (request, reply) => {
    const viewer = viewerOf(request);
    const [s, stats, days] = await Promise.all([
      billingStatus(deps, viewer.organizationId),
      organizationStatistics(deps, viewer.organizationId),
      lastDaysOfUsage(deps, viewer.organizationId, DAYS),
    ]);
    return send(
      reply,
      200,
      page(
        { title: 'Overview', viewer, section: '/dashboard' },
        html`<h1>Overview</h1>
<div class="cards">${card('Plan', s.plan ?? '')}${card('Active tasks', `${stats.activeTasks} of ${stats.totalTasks}`)}
${card('Runs this period', `${s.runsUsed} / ${s.runsLimit ?? '∞'}`)}${card('Successful runs', stats.successfulRuns ?? 0)}
${card('Failed runs', stats.failedRuns ?? 0)}${card('Total cost', dollars(stats.totalCostCents ?? 0))}${card('Tokens', stats.totalTokensUsed ?? 0)}</div>
${usageChart(days)}
<p><a class="button" href="/dashboard/tasks/new">New task</a> <a class="button secondary" href="/dashboard/keys">API keys</a></p>`,
      ),
    );
  });

  scope.get<{ Querystring: { checkout?: string } }>('/dashboard/billing', async (request, reply) => {
    const viewer = viewerOf(request);
    const flash =
      request.query.checkout === 'success'
        ? ({
            kind: 'ok',
            text: 'Thank you: the paid plan starts as soon as Stripe confirms the payment.',
          } as const)
        : request.query.checkout === 'cancelled'
          ? ({ kind: 'error', text: 'The checkout was cancelled; nothing was charged.' } as const)
          : undefined;
    return send(reply, 200, await billingPage(deps, viewer, flash));
  });

  for (const [path, create] of [
    ['/dashboard/billing/checkout', createCheckoutSession],
    ['/dashboard/billing/portal', createPortalSession],
  ] as const) {
    scope.post(path, async (request, reply) => {
      const viewer = viewerOf(request);
      try {
        const { url } = await create(deps, viewer.organizationId);
        return reply.redirect(url, 303);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        return send(reply, err.status, await billingPage(deps, viewer, { kind: 'error', text: err.message }));
      }
    });
  }
}

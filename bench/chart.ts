/**
 * The benchmark's chart, as SVG: start latency (p50 and p99) and completions per second against
 * concurrency, vmplane beside the floor. Drawn by Vega-Lite, rendered headless by Vega.
 */
import * as vega from 'vega'
import { compile, type TopLevelSpec } from 'vega-lite'

export interface ChartPoint {
  system: 'vmplane' | 'floor'
  concurrency: number
  p50Ms: number
  p99Ms: number
  perS: number
}

export async function drawChart (points: ChartPoint[], title: string): Promise<string> {
  const latency = points.flatMap((p) => [
    { system: p.system, concurrency: p.concurrency, series: `${p.system} p50`, ms: p.p50Ms },
    { system: p.system, concurrency: p.concurrency, series: `${p.system} p99`, ms: p.p99Ms }
  ])
  const panel = (title: string, values: object[], y: { field: string, title: string }, color: string): object => ({
    title,
    width: 360,
    height: 240,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'concurrency', type: 'quantitative', scale: { type: 'log' }, title: 'operations in flight' },
      y: { ...y, type: 'quantitative' },
      color: { field: color, type: 'nominal', title: null },
      strokeDash: { field: 'system', type: 'nominal', legend: null }
    }
  })
  const spec = {
    title,
    resolve: { scale: { color: 'independent' } },
    hconcat: [
      panel('start to running: latency', latency, { field: 'ms', title: 'ms' }, 'series'),
      panel('start to running: throughput', points, { field: 'perS', title: 'completions per second' }, 'system')
    ]
  } as TopLevelSpec
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' })
  return await view.toSVG()
}

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { temporalErrorSummary } from '../../helpers/temporal-trouble.js'

const DEV = 'time=2026-11-28T06:57:31.248 level=ERROR msg="service failures" operation=SignalWorkflowExecution error="shard status unknown" logging-call-at=telemetry.go:424'
const CLUSTER = '{"level":"error","ts":"2026-11-28T04:13:41.988Z","msg":"Persistent fetch operation Failure","shard-id":7,"error":"shard status unknown","stacktrace":"a\\n\\tb"}'

describe('temporalErrorSummary', () => {
  it('counts the error lines of either log format by message and error, the most frequent first, with the first time each was seen', () => {
    const lines = [
      'time=2026-11-28T06:57:30.000 level=WARN msg="network dial error" error="connection refused"',
      CLUSTER, DEV, DEV.replace('06:57:31.248', '06:57:32.000')
    ]
    assert.equal(temporalErrorSummary(lines, []), [
      'Temporal: 3 error line(s) logged, the most frequent 2:',
      '  2× from 2026-11-28T06:57:31.248: service failures: shard status unknown',
      '  1× from 2026-11-28T04:13:41.988Z: Persistent fetch operation Failure: shard status unknown',
      'Temporal never ended'
    ].join('\n'))
  })

  it('says so when nothing was logged, and lists the exits', () => {
    assert.equal(temporalErrorSummary(['Server:  localhost:7233'], ['--- 2026-11-28T04:13:42.454Z exited with exit code 1 after 12 s; restarting in 1 s']),
      'Temporal: 0 error line(s) logged\nTemporal ended 1 time(s): --- 2026-11-28T04:13:42.454Z exited with exit code 1 after 12 s; restarting in 1 s')
  })
})

/**
 * Every activity this worker runs heartbeats while it runs, whatever it does.
 *
 * A heartbeat says "the worker holding this activity is alive". With a heartbeat timeout (2 s
 * for the writes and the agent calls, workflows/activity-proxies.ts), an activity whose worker died
 * or froze is tried again on another worker at once, instead of after its start-to-close
 * timeout. With eager dispatch an activity runs on the worker that scheduled it, so a killed
 * worker always holds the write it had just decided: before the writes heartbeated, a stop whose
 * worker was killed was recorded 10 s late. The activities themselves no longer heartbeat; local
 * activities have no heartbeat.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker'

const HEARTBEAT_EVERY_MS = 1000

export const heartbeatWhileRunning: ActivityInterceptorsFactory = (context) => ({
  inbound: {
    async execute (input, next) {
      if (context.info.isLocal) return await next(input)
      const beating = setInterval(() => { context.heartbeat() }, HEARTBEAT_EVERY_MS)
      try {
        return await next(input)
      } finally {
        clearInterval(beating)
      }
    }
  }
})

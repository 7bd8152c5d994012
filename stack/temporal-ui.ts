/**
 * The cluster shape's Temporal Web UI: the UI's own server (`temporal-ui-server`, the version the
 * CLI's dev server embeds and Compose runs), a component of its own, `temporal-ui`, at the URL
 * the dev server's UI would have (`VMPLANE_TEMPORAL_UI_PORT`), talking to the frontend over gRPC.
 * Its configuration is `<data dir>/temporal/config/ui.yaml`, set as the dev server sets its
 * built-in one.
 */
import type { StackConfig } from './config.js'
import type { StackPaths } from './data-dir.js'
import type { ComponentSpec } from './supervisor.js'
import { configuredComponent } from './temporal-cluster.js'
import { temporalAddress } from './temporal.js'

export async function prepareUiServer (ui: string, config: StackConfig, paths: StackPaths, env: NodeJS.ProcessEnv): Promise<ComponentSpec> {
  return await configuredComponent({
    name: 'temporal-ui',
    command: ui,
    configName: 'ui',
    config: {
      temporalGrpcAddress: temporalAddress(config),
      host: '127.0.0.1',
      port: config.temporalUiPort,
      enableUi: true,
      defaultNamespace: config.namespace,
      // Plain HTTP on loopback: its session cookie cannot be a Secure one.
      cors: { cookieInsecure: true },
      // Not a line per request in the stack's output.
      hideLogs: true
    },
    paths,
    env
  })
}

/**
 * Where `npm run build` puts the Cloud Hypervisor simulator (scripts/build/build-simulator.ts).
 * It is named like the real program, so the driver runs either one the same way.
 */
import { fileURLToPath } from 'node:url'

export const SIMULATOR_BINARY = fileURLToPath(new URL('../../simulator/cloud-hypervisor', import.meta.url))

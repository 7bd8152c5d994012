/**
 * Preloaded into every Node process the tests start (NODE_OPTIONS, set by run-test-files.mjs):
 * a test file's own process moves itself into a CPU accounting group named after the file, under
 * VMPLANE_TEST_CPU_GROUPS, before the file runs. Everything it starts (its stacks, their
 * components and VMMs, its local Temporal) is born in the group, so the group's usage is the
 * file's whole cost. Any other process leaves its group as it is.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { cpuGroupName } from './cpu-groups.mjs'

const file = process.argv[1] ?? ''
const root = process.env.VMPLANE_TEST_CPU_GROUPS
if (root !== undefined && file.endsWith('.test.js')) {
  const group = join(root, cpuGroupName(file))
  try {
    mkdirSync(group, { recursive: true })
    writeFileSync(join(group, 'cgroup.procs'), String(process.pid))
  } catch {
    // Unaccounted, not failed: the figure is a report, not part of the test.
  }
}

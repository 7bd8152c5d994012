/**
 * CPU accounting by test file: a control group per file (cgroup v1's cpuacct, or v2, where every
 * group counts its CPU), whose usage npm test reports once the file has ended.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync } from 'node:fs'
import { join, relative } from 'node:path'

/** Where the compiled test files are. */
const TESTS_ROOT = join(import.meta.dirname, '..', '..', 'dist', 'test')

/**
 * The folder of a run's groups (`vmplane-test-files-<pid>`: a group that a leaked process keeps
 * is never counted again), made; null where no accounting hierarchy can be written.
 */
export function cpuGroupsRoot () {
  for (const [hierarchy, usageFile] of [['/sys/fs/cgroup/cpuacct', 'cpuacct.usage'], ['/sys/fs/cgroup', 'cpu.stat']]) {
    if (!existsSync(join(hierarchy, usageFile))) continue
    const root = join(hierarchy, `vmplane-test-files-${process.pid}`)
    try {
      mkdirSync(root, { recursive: true })
      return root
    } catch {}
  }
  return null
}

/**
 * The group of a test file, given by its absolute path: its path under dist/test,
 * `faults/fault-matrix.test.js` as `faults-fault-matrix`.
 */
export function cpuGroupName (file) {
  return relative(TESTS_ROOT, file).replace(/\.test\.js$/, '').replaceAll('/', '-')
}

/**
 * The CPU seconds a file's group used (its processes' and those they started), the group removed;
 * null if it has none.
 */
export function takeCpuSeconds (root, file) {
  const group = join(root, cpuGroupName(file))
  if (!existsSync(group)) return null
  const seconds = existsSync(join(group, 'cpuacct.usage'))
    ? Number(readFileSync(join(group, 'cpuacct.usage'), 'utf8')) / 1e9
    : Number(/^usage_usec (\d+)$/m.exec(readFileSync(join(group, 'cpu.stat'), 'utf8'))?.[1] ?? NaN) / 1e6
  removeGroup(group)
  return seconds
}

export function removeGroup (group) {
  try {
    rmdirSync(group)
  } catch {
    // Something started in it still runs.
  }
}

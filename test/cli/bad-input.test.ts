/**
 * Bad input to the CLI gets one line on stderr and a documented exit code, never a stack trace
 * and never commander's multi-line output: unknown commands, missing or invalid arguments, no API
 * configured, an API nobody listens at. No stack runs here; nothing reaches an API.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { freePorts } from '../helpers/stack.js'
import { assertOneLineError, runCli } from '../helpers/cli.js'

const USAGE = 2
const UNAVAILABLE = 3

describe('vmplane CLI, bad input', () => {
  it('an unknown command is a usage error, with a suggestion on the same line', async () => {
    assertOneLineError(await runCli(['frobnicate']), USAGE, /unknown command 'frobnicate'/)
    assertOneLineError(await runCli(['instances', 'lst']), USAGE, /unknown command 'lst' \(Did you mean list\?\)/)
  })

  it('a group or the program without a command names the choices in one line', async () => {
    assertOneLineError(await runCli([]), USAGE, /missing command after 'vmplane': one of instances, projects, quotas, tokens, hosts, networks, images, operations/)
    assertOneLineError(await runCli(['instances']), USAGE, /missing command after 'vmplane instances': one of list, get, events, create/)
  })

  it('a missing argument or required option is a usage error', async () => {
    assertOneLineError(await runCli(['instances', 'get']), USAGE, /missing required argument 'instance'/)
    assertOneLineError(await runCli(['operations', 'get']), USAGE, /missing required argument 'id'/)
    assertOneLineError(await runCli(['instances', 'create', '--name', 'web-1']), USAGE, /required option '--vcpus <n>' not specified/)
  })

  it('an invalid option value is a usage error, before any request', async () => {
    assertOneLineError(await runCli(['instances', 'list', '--output', 'xml']), USAGE, /argument 'xml' is invalid\. Allowed choices are table, json/)
    assertOneLineError(await runCli(['instances', 'list', '--state', 'sleeping']), USAGE, /argument 'sleeping' is invalid/)
    const create = ['instances', 'create', '--name', 'web-1', '--vcpus', 'two', '--memory', '256', '--kernel', 'vmlinux']
    assertOneLineError(await runCli(create), USAGE, /'--vcpus <n>' argument 'two' is invalid\. must be a whole number/)
    assertOneLineError(await runCli(['instances', 'start', 'web-1', '--wait', '--timeout', '-1']), USAGE, /'--timeout <seconds>' argument '-1' is invalid/)
    assertOneLineError(await runCli(['hosts', 'list', '--frobnicate']), USAGE, /unknown option '--frobnicate'/)
  })

  it('a malformed disk or interface, or a key or user-data file that cannot be read, is a usage error, before any request', async () => {
    const create = ['--url', 'http://127.0.0.1:9', '--token', 'secret', 'instances', 'create', '--name', 'web-1', '--vcpus', '1', '--memory', '256', '--kernel', 'vmlinux']
    assertOneLineError(await runCli([...create, '--disk', 'data']), USAGE, /'--disk <name:GiB>' argument 'data' is invalid\. must be name:GiB/)
    assertOneLineError(await runCli([...create, '--disk', 'data:ten']), USAGE, /'--disk <name:GiB>' argument 'data:ten' is invalid/)
    assertOneLineError(await runCli([...create, '--network', 'default=']), USAGE, /'--network <network\[=ip\]>' argument 'default=' is invalid/)
    assertOneLineError(await runCli([...create, '--network', 'a=b=c']), USAGE, /argument 'a=b=c' is invalid/)
    assertOneLineError(await runCli([...create, '--image', 'debian-12.qcow2', '--ssh-key-file', '/nonexistent/id.pub']), USAGE, /cannot read \/nonexistent\/id\.pub: ENOENT/)
    assertOneLineError(await runCli([...create, '--image', 'debian-12.qcow2', '--user-data-file', '/nonexistent/user-data']), USAGE, /cannot read \/nonexistent\/user-data: ENOENT/)
  })

  it('no API URL or token anywhere is a usage error that says where it looked', async () => {
    assertOneLineError(await runCli(['hosts', 'list']), USAGE, /no API URL: pass --url or set VMPLANE_URL, or start the dev stack \(\/nonexistent\/vmplane-cli-test\/run\/stack\.json is missing\)/)
    assertOneLineError(await runCli(['hosts', 'list'], { env: { VMPLANE_URL: 'http://127.0.0.1:9' } }), USAGE, /no API token: pass --token or set VMPLANE_TOKEN/)
  })

  it('an API nobody listens at is exit 3, named with the reason', async () => {
    const url = `http://127.0.0.1:${await freePorts(1)}`
    const started = performance.now()
    const result = await runCli(['--url', url, '--token', 'secret', 'instances', 'list'])
    assertOneLineError(result, UNAVAILABLE, new RegExp(`cannot reach the API at ${url}: connect ECONNREFUSED`))
    assert.ok(performance.now() - started < 10_000, 'gives up within seconds')
    // The same through the environment, and for a change (which would carry an Idempotency-Key).
    const env = { VMPLANE_URL: url, VMPLANE_TOKEN: 'secret' }
    assertOneLineError(await runCli(['instances', 'delete', '00000000-0000-4000-8000-000000000000', '--wait'], { env }), UNAVAILABLE, /cannot reach the API/)
  })

  it('--help documents the exit codes and the environment, and exits 0', async () => {
    const { code, stdout, stderr } = await runCli(['--help'])
    assert.equal(code, 0)
    assert.equal(stderr, '')
    for (const line of [/0 {2}success/, /1 {2}the operation ended failed or superseded, or the API refused the request \(4xx\)/, /2 {2}usage error/, /3 {2}the API is unreachable or answered 5xx/, /4 {2}--wait timed out/]) {
      assert.match(stdout, line)
    }
    assert.match(stdout, /VMPLANE_URL/)
    assert.match(stdout, /VMPLANE_TOKEN/)
    assert.match(stdout, /VMPLANE_DATA_DIR/)
  })
})

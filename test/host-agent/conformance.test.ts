/**
 * Conformance with the real Cloud Hypervisor API spec (host-agent/cloud-hypervisor/
 * cloud-hypervisor.yaml, a verbatim copy): every request the driver sends goes to a path and
 * method the spec has, always with Content-Length, with a body exactly where the spec has a
 * request body, and that body valid against the spec's schema (ajv). The simulator's answers
 * are checked against the spec's response schemas too.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { Ajv, type ValidateFunction } from 'ajv'
import { parse } from 'yaml'
import { CloudHypervisorClient } from '../../host-agent/cloud-hypervisor/api-client.js'
import { SERIAL_SOCKET } from '../../host-agent/cloud-hypervisor/launch.js'
import { buildVmConfig, type ResolvedBootFiles } from '../../host-agent/cloud-hypervisor/vm-config.js'
import type { VmmSpec } from '../../domain/host-agent-api.js'
import { buildSimulator, SimulatedVmm, tempDir, writeImages } from './helpers/simulator.js'

const SPEC_PATH = fileURLToPath(new URL('../../../host-agent/cloud-hypervisor/cloud-hypervisor.yaml', import.meta.url))

interface Operation {
  requestBody?: { required?: boolean, content: Record<string, { schema: { $ref: string } }> }
}
interface ApiSpec {
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, unknown> }
}

/** The spec's integer formats; ajv knows none of them. */
const INTEGER_FORMATS: Record<string, [number, number]> = {
  int8: [-(2 ** 7), 2 ** 7 - 1],
  int16: [-(2 ** 15), 2 ** 15 - 1],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint8: [0, 2 ** 8 - 1],
  uint16: [0, 2 ** 16 - 1],
  uint32: [0, 2 ** 32 - 1],
  uint64: [0, Number.MAX_SAFE_INTEGER]
}

let spec: ApiSpec
let ajv: Ajv

function validatorFor (ref: string): ValidateFunction {
  return ajv.getSchema(`cloud-hypervisor.yaml${ref}`) ?? assert.fail(`the spec has no ${ref}`)
}

function assertValid (ref: string, value: unknown): void {
  const validate = validatorFor(ref)
  assert.ok(validate(value), `${ref}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value, null, 2)}`)
}

before(async () => {
  spec = parse(await readFile(SPEC_PATH, 'utf8')) as ApiSpec
  ajv = new Ajv({ strict: true, allErrors: true })
  ajv.addVocabulary(['components'])
  for (const [name, [min, max]] of Object.entries(INTEGER_FORMATS)) {
    ajv.addFormat(name, { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= min && n <= max })
  }
  ajv.addSchema({ $id: 'cloud-hypervisor.yaml', components: spec.components })
})

interface Recorded {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: string
}

/** A stand-in VMM that records every request and answers like a healthy one. */
async function startRecorder (socketPath: string, recorded: Recorded[]): Promise<Server> {
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => { body += chunk })
    req.on('end', () => {
      recorded.push({ method: req.method!, path: req.url!, headers: req.headers, body })
      const endpoint = req.url!.replace('/api/v1/', '')
      const answers: Record<string, unknown> = {
        'vmm.ping': { version: '54.0.0' },
        'vm.info': { config: { payload: { kernel: '/k' } }, state: 'Running' }
      }
      if (endpoint in answers) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(answers[endpoint]))
      } else {
        res.writeHead(endpoint === 'vmm.shutdown' ? 200 : 204).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
  return server
}

const spec1: VmmSpec = { vcpus: 2, memoryMiB: 1024, boot: { kernel: 'vmlinux', initramfs: 'initrd.img', cmdline: 'console=ttyS0 quiet' } }
const spec2: VmmSpec = { vcpus: 64, memoryMiB: 64, boot: { kernel: 'boot/vmlinux' } }
const withInitramfs: ResolvedBootFiles = { kernel: '/images/vmlinux', initramfs: '/images/initrd.img', disks: [], nets: [] }
/** An instance with a boot overlay, a data disk, its seed and two interfaces, as the agent prepares it. */
const withDevices: ResolvedBootFiles = {
  kernel: '/images/boot/vmlinux',
  initramfs: null,
  disks: [
    { path: '/storage/disks/5b1c2f4e-8a0d-4e57-9d3e-0c6f1a2b3c4d.qcow2', readonly: false, imageType: 'Qcow2' },
    { path: '/storage/disks/6c2d3e5f-9b1e-4f68-8e4f-1d7a2b3c4d5e.raw', readonly: false, imageType: 'Raw' },
    { path: '/storage/seeds/7d3e4f60-ac2f-4079-9f50-2e8b3c4d5e6f.img', readonly: true, imageType: 'Raw' }
  ],
  nets: [
    { tap: 'vmp0e8b3c4d5e6f', mac: '0e:8b:3c:4d:5e:6f', numQueues: 2 },
    { tap: 'vmp1a2b3c4d5e6f', mac: '1a:2b:3c:4d:5e:6f', numQueues: 2 }
  ]
}

describe('conformance with cloud-hypervisor.yaml', () => {
  let dir: { dir: string, remove: () => Promise<void> }
  before(async () => {
    await buildSimulator()
    dir = await tempDir('vmp-conf-')
  })
  after(async () => { await dir.remove() })

  it('keeps the spec copy with its provenance header', async () => {
    const text = await readFile(SPEC_PATH, 'utf8')
    assert.match(text.split('\n')[0]!, /^# Cloud Hypervisor REST API spec, from cloud-hypervisor\/cloud-hypervisor .* at commit [0-9a-f]{40}; Apache-2\.0$/)
  })

  it('every request the driver sends matches the spec: path, method, Content-Length and body schema', async () => {
    const recorded: Recorded[] = []
    const socketPath = join(dir.dir, 'recorder.sock')
    const server = await startRecorder(socketPath, recorded)
    const client = new CloudHypervisorClient(socketPath, 2000)
    try {
      await client.ping()
      await client.createVm(buildVmConfig(spec1, withInitramfs, SERIAL_SOCKET))
      await client.createVm(buildVmConfig(spec2, withDevices, SERIAL_SOCKET))
      await client.bootVm(AbortSignal.timeout(2000))
      await client.info()
      await client.powerButton()
      await client.rebootVm(AbortSignal.timeout(2000))
      await client.shutdownVm()
      await client.deleteVm()
      await client.receiveMigration('unix:/storage/migrations/6e1d6a6c-4f3a-4f43-9d2b-0c3f1a2b3c4d.sock', AbortSignal.timeout(2000))
      await client.sendMigration({ destination_url: 'tcp:10.0.0.2:49152', downtime_ms: 300, timeout_s: 3600 })
      await client.info(AbortSignal.timeout(2000))
      await client.shutdownVmm()
    } finally {
      client.close()
      server.close()
    }

    const endpoints = recorded.map((r) => `${r.method} ${r.path}`)
    assert.deepEqual(new Set(endpoints), new Set([
      'GET /api/v1/vmm.ping', 'PUT /api/v1/vm.create', 'PUT /api/v1/vm.boot', 'GET /api/v1/vm.info',
      'PUT /api/v1/vm.power-button', 'PUT /api/v1/vm.reboot', 'PUT /api/v1/vm.shutdown', 'PUT /api/v1/vm.delete',
      'PUT /api/v1/vm.receive-migration', 'PUT /api/v1/vm.send-migration', 'PUT /api/v1/vmm.shutdown'
    ]))
    for (const request of recorded) {
      const where = `${request.method} ${request.path}`
      assert.ok(request.path.startsWith('/api/v1/'), where)
      const operation = spec.paths[request.path.slice('/api/v1'.length)]?.[request.method.toLowerCase()]
      assert.ok(operation !== undefined, `${where} is not in the spec`)
      assert.equal(request.headers['transfer-encoding'], undefined, `${where} must not be chunked`)
      assert.equal(request.headers['content-length'], String(Buffer.byteLength(request.body)), `${where} needs Content-Length`)
      const content = operation.requestBody?.content['application/json']
      if (content === undefined) {
        assert.equal(request.body, '', `${where} has no request body in the spec`)
        continue
      }
      assert.equal(request.headers['content-type'], 'application/json', where)
      assertValid(content.schema.$ref, JSON.parse(request.body))
    }
  })

  it('vm.create bodies carry what the real program needs: bytes, console Off, serial to a socket, explicit image types, backing files for overlays, named TAPs', () => {
    const config = buildVmConfig(spec2, withDevices, SERIAL_SOCKET)
    assertValid('#/components/schemas/VmConfig', config)
    for (const disk of config.disks ?? []) assertValid('#/components/schemas/DiskConfig', disk)
    for (const nic of config.net ?? []) assertValid('#/components/schemas/NetConfig', nic)
    assertValid('#/components/schemas/ConsoleConfig', config.serial)
    assert.equal(config.memory.size, 64 * 1024 * 1024)
    assert.deepEqual(config.console, { mode: 'Off' })
    assert.deepEqual(config.serial, { mode: 'Socket', socket: 'con.sock' }, 'relative to the VMM directory, so valid on a migration target')
    assert.deepEqual(config.disks?.map((d) => [d.image_type, d.backing_files, d.readonly]), [['Qcow2', true, false], ['Raw', undefined, false], ['Raw', undefined, true]])
    assert.deepEqual(config.net, [
      { tap: 'vmp0e8b3c4d5e6f', mac: '0e:8b:3c:4d:5e:6f', num_queues: 2 },
      { tap: 'vmp1a2b3c4d5e6f', mac: '1a:2b:3c:4d:5e:6f', num_queues: 2 }
    ])
    const bare = buildVmConfig(spec1, withInitramfs, '/s')
    assert.equal(bare.disks, undefined, 'no disks key without disks')
    assert.equal(bare.net, undefined, 'no net key without interfaces')
  })

  it("the simulator's answers match the spec's response schemas", async () => {
    const { kernel } = await writeImages(dir.dir)
    const vmm = await SimulatedVmm.start(dir.dir)
    try {
      assertValid('#/components/schemas/VmmPingResponse', (await vmm.callJson('GET', 'vmm.ping')).json)
      await vmm.boot(kernel, 'console=ttyS0')
      assertValid('#/components/schemas/VmInfo', (await vmm.callJson('GET', 'vm.info')).json)
    } finally {
      await vmm.stop()
    }
  })
})

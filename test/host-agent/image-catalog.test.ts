/**
 * The agent's image catalog, asked for at every heartbeat: each file of the image directory is
 * read with qemu-img once per version of it, whether it is a base disk image or not (an initramfs
 * named `.img`). qemu-img here is the real one, behind a shim on PATH that counts its runs.
 */
import assert from 'node:assert/strict'
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ImageResolver } from '../../host-agent/images.js'
import { runCommand } from '../../host-agent/process/command.js'
import { countRuns, type CountedTool } from '../helpers/counted-tool.js'

describe('the image catalog', () => {
  let dir: string
  let images: string
  let qemuImg: CountedTool
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vmplane-catalog-'))
    images = join(dir, 'images')
    await runCommand('mkdir', ['-p', images])
    qemuImg = await countRuns('qemu-img', dir)
    await runCommand('qemu-img', ['create', '-q', '-f', 'qcow2', join(images, 'debian-12.qcow2'), '1G'])
    await writeFile(join(images, 'initrd.img'), Buffer.alloc(4096, 1))
  })
  after(async () => {
    qemuImg?.restore()
    await rm(dir, { recursive: true, force: true })
  })

  it('reads each file once, base image or not, and again once it changes', async () => {
    const resolver = new ImageResolver(images)
    await qemuImg.reset()
    for (let i = 0; i < 3; i++) assert.deepEqual((await resolver.catalog()).map((image) => image.name), ['debian-12.qcow2'])
    assert.equal((await qemuImg.runs()).length, 2, 'one qemu-img info per file')

    const later = new Date(Date.now() + 60_000)
    await utimes(join(images, 'initrd.img'), later, later)
    await resolver.catalog()
    const reads = await qemuImg.runs()
    assert.equal(reads.length, 3, 'the changed file read again')
    assert.match(reads[2]!, /initrd\.img$/)
  })
})

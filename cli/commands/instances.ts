/**
 * `vmplane instances list|get|events|create|start|stop|reboot|migrate|cancel-migration|delete|console|console-log`. The
 * changes answer at once with the accepted operation; with `--wait` they follow it to its end
 * (wait.ts) and exit non-zero unless it succeeded.
 */
import { readFile } from 'node:fs/promises'
import { Option, type Command } from 'commander'
import { HOST_FAILURE_POLICIES, INSTANCE_STATES, RESTART_POLICIES } from '../../domain/instance.js'
import type { ApiClient } from '../api-client.js'
import type { Accepted, EventList, Instance, InstanceList } from '../api-types.js'
import { dataDisk, networkInterface, positiveSeconds, repeated, wholeNumber } from '../arguments.js'
import { attachConsole } from '../console.js'
import { contextOf, show, type Context } from '../context.js'
import { UsageError } from '../errors.js'
import { instanceId } from '../instance-ref.js'
import { Progress } from '../progress.js'
import { acceptedSummary, eventTable, instanceDetail, instanceTable } from '../views.js'
import { ensureSucceeded, waitForOperation } from '../wait.js'

const DEFAULT_WAIT_TIMEOUT_SECONDS = 300
const INSTANCE = '<instance>'
const INSTANCE_HELP = 'the instance, by ID or by name'

interface WaitFlags {
  wait?: boolean
  timeout: number
}

interface PageFlags {
  limit: number
  cursor?: string
}

interface CreateFlags extends WaitFlags {
  name: string
  vcpus: number
  memory: number
  kernel: string
  initramfs?: string
  cmdline?: string
  start: boolean
  stopGrace?: number
  restartPolicy?: string
  onHostFailure?: string
  image?: string
  bootSize?: number
  disk?: Array<{ name: string, sizeGiB: number }>
  /** Interfaces to make; false with --no-network. */
  network?: Array<{ network: string, ip?: string }> | false
  sshKeyFile?: string[]
  userDataFile?: string
}

interface MigrateFlags extends WaitFlags {
  to?: string
}

interface GraceFlags extends WaitFlags {
  grace?: number
}

export function addInstanceCommands (program: Command): void {
  const instances = program.command('instances').description('list, inspect, create and change instances')

  withPaging(instances.command('list')
    .description('list instances, oldest first (destroyed ones only with --state destroyed)')
    .addOption(new Option('--state <state>', 'only instances in this state').choices(INSTANCE_STATES)))
    .action(async (options: PageFlags & { state?: string }, command: Command) => {
      const context = await contextOf(command)
      const query = pageQuery(options)
      if (options.state !== undefined) query.set('state', options.state)
      const page = await context.api.get<InstanceList>(`${context.project}/instances?${query}`)
      show(context, page, (p) => withNextPage(instanceTable(p.items), p.nextCursor))
    })

  instances.command('get')
    .description('show an instance: its state and why (operation in flight, VMM and host, last error, conditions)')
    .argument(INSTANCE, INSTANCE_HELP)
    .action(async (instance: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      const id = await instanceId(context, instance)
      show(context, await context.api.get<Instance>(`${context.project}/instances/${id}`), instanceDetail)
    })

  withPaging(instances.command('events')
    .description("an instance's history, newest first: every state change and why")
    .argument(INSTANCE, INSTANCE_HELP))
    .action(async (instance: string, options: PageFlags, command: Command) => {
      const context = await contextOf(command)
      const id = await instanceId(context, instance)
      const page = await context.api.get<EventList>(`${context.project}/instances/${id}/events?${pageQuery(options)}`)
      show(context, page, (p) => withNextPage(eventTable(p.items), p.nextCursor))
    })

  withWait(instances.command('create')
    .description('create an instance and start it (unless --no-start)')
    .requiredOption('--name <name>', 'lower-case letters, digits and dashes')
    .requiredOption('--vcpus <n>', 'virtual CPUs', wholeNumber)
    .requiredOption('--memory <MiB>', 'memory in MiB', wholeNumber)
    .requiredOption('--kernel <image>', "kernel image, a name in the hosts' image directory")
    .option('--initramfs <image>', "initramfs image, a name in the hosts' image directory")
    .option('--cmdline <cmdline>', 'kernel command line')
    .option('--no-start', 'create it stopped')
    .option('--stop-grace <seconds>', 'how long a stop waits for the guest to power off before killing its VMM', wholeNumber)
    .addOption(new Option('--restart-policy <policy>', 'on-failure restarts a failed instance by itself').choices(RESTART_POLICIES))
    .addOption(new Option('--on-host-failure <policy>', 'restart starts it on another host as soon as its host is declared lost').choices(HOST_FAILURE_POLICIES))
    .option('--image <image>', 'boot from a disk made from this base image (vmplane images list); the instance gets cloud-init')
    .option('--boot-size <GiB>', "the boot disk's size (default: the image's)", wholeNumber)
    .option('--disk <name:GiB>', 'an empty data disk; repeat for more', dataDisk)
    .option('--network <network[=ip]>', 'an interface on this network (by name or ID), at this address if given; repeat for more (default: one on the network named default, if any)', networkInterface)
    .option('--no-network', 'no interface at all')
    .option('--ssh-key-file <file>', 'OpenSSH public keys (one per line) for cloud-init to authorise; repeat for more files', repeated)
    .option('--user-data-file <file>', 'cloud-init user-data (#cloud-config …), at most 32 KiB'))
    .action(async (options: CreateFlags, command: Command) => {
      const context = await contextOf(command)
      await change(context, options, await context.api.change<Accepted>('POST', `${context.project}/instances`, await createBody(options)))
    })

  instances.command('console')
    .description("attach to the instance's serial console (a collaborator's, admin's or fleet operator's token): a raw terminal; Ctrl-] leaves")
    .argument(INSTANCE, INSTANCE_HELP)
    .action(async (instance: string, _options: unknown, command: Command) => {
      const context = await contextOf(command)
      const id = await instanceId(context, instance)
      await attachConsole(context.api.webSocket(`${context.project}/instances/${id}/console`), instance)
    })

  instances.command('console-log')
    .description("print the end of the instance's serial log (its running VMM's, or its last one's)")
    .argument(INSTANCE, INSTANCE_HELP)
    .option('--bytes <n>', 'how much of the end, at most 1 MiB', wholeNumber, 64 * 1024)
    .action(async (instance: string, options: { bytes: number }, command: Command) => {
      const context = await contextOf(command)
      const id = await instanceId(context, instance)
      process.stdout.write(await context.api.getText(`${context.project}/instances/${id}/console/log?bytes=${options.bytes}`))
    })

  addChange<WaitFlags>(instances, 'start', 'start a stopped or failed instance',
    async (api, path) => await api.change<Accepted>('POST', `${path}/start`))
  addChange<WaitFlags>(instances, 'reboot', 'reboot a running instance',
    async (api, path) => await api.change<Accepted>('POST', `${path}/reboot`))
  addChange<MigrateFlags>(instances, 'migrate', 'live-migrate a running instance to another host',
    async (api, path, { to }) => await api.change<Accepted>('POST', `${path}/migrate`, to === undefined ? undefined : { targetHostId: to }),
    (command) => command.option('--to <host>', 'the host to migrate to (default: one placement chooses)'))
  addChange<WaitFlags>(instances, 'cancel-migration', "cancel the instance's live migration: the VM stays where it was, unless the target already has it",
    async (api, path) => await api.change<Accepted>('POST', `${path}/migrate/cancel`))
  addChange<GraceFlags>(instances, 'stop', 'stop an instance: ACPI power-off, then kill its VMM when the grace period ends',
    async (api, path, { grace }) => await api.change<Accepted>('POST', `${path}/stop`, grace === undefined ? undefined : { graceSeconds: grace }),
    withGrace)
  addChange<GraceFlags>(instances, 'delete', 'stop an instance (preempting anything in flight), then destroy it',
    async (api, path, { grace }) => await api.change<Accepted>('DELETE', `${path}${grace === undefined ? '' : `?graceSeconds=${grace}`}`),
    withGrace)
}

/**
 * A change to one existing instance: finds it by ID or name in the project, sends the request to
 * the instance's path (`/v1/projects/<project>/instances/<id>`), follows it with --wait.
 */
function addChange<Flags extends WaitFlags> (
  instances: Command,
  name: string,
  description: string,
  request: (api: ApiClient, instancePath: string, flags: Flags) => Promise<Accepted>,
  withOptions = (command: Command) => command
): void {
  withWait(withOptions(instances.command(name).description(description).argument(INSTANCE, INSTANCE_HELP)))
    .action(async (instance: string, flags: Flags, command: Command) => {
      const context = await contextOf(command)
      const id = await instanceId(context, instance)
      await change(context, flags, await request(context.api, `${context.project}/instances/${id}`, flags))
    })
}

function withGrace (command: Command): Command {
  return command.option('--grace <seconds>', "overrides the instance's stop grace period; 0 kills the VMM at once", wholeNumber)
}

function withWait (command: Command): Command {
  return command
    .option('--wait', 'follow the operation to its end, showing the state transitions')
    .option('--timeout <seconds>', 'with --wait: give up (exit 4) after this long', positiveSeconds, DEFAULT_WAIT_TIMEOUT_SECONDS)
}

/**
 * Prints what a change did. Without `--wait`, or when nothing needed doing, that is the API's
 * answer; with it, the instance and operation once the operation has ended, in the same shape.
 */
async function change (context: Context, flags: WaitFlags, accepted: Accepted): Promise<void> {
  if (flags.wait !== true || accepted.operation === null) {
    show(context, accepted, acceptedSummary)
    return
  }
  const started = { instance: accepted.instance, operation: accepted.operation }
  const outcome = await waitForOperation(context, started, flags.timeout * 1000, new Progress(accepted.instance.name))
  show(context, outcome, (o) => instanceDetail(o.instance))
  ensureSucceeded(outcome)
}

function withPaging (command: Command): Command {
  return command
    .option('--limit <n>', 'at most this many (1-500)', wholeNumber, 50)
    .option('--cursor <cursor>', "the next page: the previous page's nextCursor")
}

async function createBody (options: CreateFlags) {
  const sshKeys = (await Promise.all((options.sshKeyFile ?? []).map(readLocalFile)))
    .flatMap((text) => text.split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#')))
  return {
    name: options.name,
    vcpus: options.vcpus,
    memoryMiB: options.memory,
    boot: { kernel: options.kernel, initramfs: options.initramfs, cmdline: options.cmdline },
    start: options.start,
    stopGraceSeconds: options.stopGrace,
    restartPolicy: options.restartPolicy,
    onHostFailure: options.onHostFailure,
    bootDisk: options.image === undefined ? undefined : { image: options.image, sizeGiB: options.bootSize },
    dataDisks: options.disk,
    interfaces: options.network === false ? [] : options.network,
    sshKeys: sshKeys.length === 0 ? undefined : sshKeys,
    userData: options.userDataFile === undefined ? undefined : await readLocalFile(options.userDataFile)
  }
}

/** A file the user named on the command line; one that cannot be read is their mistake (exit 2). */
async function readLocalFile (path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
}

function pageQuery (options: PageFlags): URLSearchParams {
  const query = new URLSearchParams({ limit: String(options.limit) })
  if (options.cursor !== undefined) query.set('cursor', options.cursor)
  return query
}

function withNextPage (text: string, nextCursor: string | null): string {
  return nextCursor === null ? text : `${text}\nmore: --cursor ${nextCursor}`
}

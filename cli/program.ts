/**
 * The `vmplane` command line: global options, the command groups, and the one place every
 * failure becomes a single line on stderr and an exit code (errors.ts). Commander is told not to
 * exit or print errors itself, so its usage errors come here too and leave as exit 2.
 */
import { readFileSync } from 'node:fs'
import { Command, CommanderError, Option, type HelpContext } from 'commander'
import { addFirewallRuleCommands } from './commands/firewall-rules.js'
import { addHostCommands } from './commands/hosts.js'
import { addImageCommands } from './commands/images.js'
import { addInstanceCommands } from './commands/instances.js'
import { addNetworkCommands } from './commands/networks.js'
import { addOperationCommands } from './commands/operations.js'
import { addProjectCommands } from './commands/projects.js'
import { CliError, EXIT, EXIT_CODES_HELP, oneLine, UsageError, type ExitCode } from './errors.js'
import { OUTPUT_FORMATS } from './output.js'

const ENVIRONMENT_HELP = `Environment:
  VMPLANE_URL       the API's base URL, or its replicas' separated by commas (default: apiUrl in
                    <data>/run/stack.json)
  VMPLANE_TOKEN     the bearer token (default: apiToken in <data>/run/stack.json, else <data>/api-token)
  VMPLANE_PROJECT   the project instances, networks, firewall rules and operations are in (default:
                    default)
  VMPLANE_DATA_DIR  the dev stack's data directory, <data> above (default: .vmplane)`

/**
 * Commander prints a group's whole help as an error when it is given no command. A one-line
 * usage error says the same in a line and keeps the promise of one line for bad input.
 */
class VmplaneCommand extends Command {
  override createCommand (name?: string): VmplaneCommand {
    return new VmplaneCommand(name)
  }

  override help (context?: HelpContext | ((help: string) => string)): never {
    if (typeof context === 'function') return super.help(context)
    if (context?.error === true) {
      const choices = this.commands.map((command) => command.name()).join(', ')
      throw new UsageError(`missing command after '${commandPath(this)}': one of ${choices} (see ${commandPath(this)} --help)`)
    }
    return super.help(context)
  }
}

function commandPath (command: Command): string {
  return command.parent === null ? command.name() : `${commandPath(command.parent)} ${command.name()}`
}

export function buildProgram (): Command {
  const program = new VmplaneCommand('vmplane')
    .description('Control vmplane instances from the command line.')
    .version(packageVersion())
    .option('--url <url>', "the API's base URL, or its replicas' separated by commas, tried in turn (overrides VMPLANE_URL)")
    .option('--token <token>', 'the bearer token (overrides VMPLANE_TOKEN)')
    .addOption(new Option('--project <project>', 'the project (by name or ID) instances, networks, firewall rules and operations are in').env('VMPLANE_PROJECT').default('default'))
    .addOption(new Option('-o, --output <format>', 'table for people, json (the API\'s own) for scripts').choices(OUTPUT_FORMATS).default('table'))
    .exitOverride()
    .configureOutput({ outputError: () => {} })
    .addHelpText('after', `\n${ENVIRONMENT_HELP}\n\n${EXIT_CODES_HELP}`)
  // Added after the settings above, which the subcommands inherit.
  addInstanceCommands(program)
  addProjectCommands(program)
  addHostCommands(program)
  addNetworkCommands(program)
  addImageCommands(program)
  addOperationCommands(program)
  addFirewallRuleCommands(program)
  return program
}

/** Runs the command line and returns the exit code; prints every failure as `vmplane: <one line>`. */
export async function run (argv: string[]): Promise<ExitCode> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' })
    return EXIT.ok
  } catch (error) {
    const { message, exitCode } = failure(error)
    if (message !== null) process.stderr.write(`vmplane: ${oneLine(message)}\n`)
    return exitCode
  }
}

function failure (error: unknown): { message: string | null, exitCode: ExitCode } {
  if (error instanceof CommanderError) {
    // --help and --version end here too, as a success with nothing more to say.
    if (error.exitCode === 0) return { message: null, exitCode: EXIT.ok }
    return { message: error.message.replace(/^error: /, ''), exitCode: EXIT.usage }
  }
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode }
  // A bug, not bad input: still one line, the message without its stack.
  return { message: error instanceof Error ? error.message : String(error), exitCode: EXIT.refused }
}

function packageVersion (): string {
  const file = new URL('../../package.json', import.meta.url)
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version
}

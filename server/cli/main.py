"""The ``cuda-agent`` group: every command added, and the entry point that turns errors into one line."""

from __future__ import annotations

import sys

import click

from base.errors import CudaAgentError
from server.cli.capture import capture
from server.cli.check import check, kernels
from server.cli.measure import bench, compare, profile
from server.cli.optimize import optimize, suite
from server.cli.reward import reward
from server.cli.serve import serve, worker
from server.cli.speedup import speedup


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cuda-agent")
def cli() -> None:
    """CUDA Agent: find, verify and measure faster CUDA kernels."""


for command in (
    serve,
    kernels,
    check,
    bench,
    optimize,
    compare,
    profile,
    capture,
    speedup,
    suite,
    worker,
    reward,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning every user-facing error into one line on stderr."""
    try:
        rv = cli.main(args=argv, prog_name="cuda-agent", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("cuda-agent: aborted", err=True)
        return 130
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `cuda-agent` (or a group): its help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(click.Context(cli)))
        return 0
    except CudaAgentError as exc:  # ours: the exit status is its branch's (base/errors.py)
        _error_line(str(exc) or type(exc).__name__)
        return exc.exit_code
    except click.ClickException as exc:  # click's own: a usage mistake (2)
        _error_line(exc.format_message() or type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("cuda-agent: interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0


def _error_line(message: str) -> None:
    click.echo(f"cuda-agent: error: {message.splitlines()[0] if message.strip() else message}", err=True)


if __name__ == "__main__":
    sys.exit(main())

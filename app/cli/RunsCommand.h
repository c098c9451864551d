// `mirrorlab-cli runs ...`: list, show, compare, export, rename, tag, note and delete the runs
// kept in the run store (--db PATH, else $MIRRORLAB_DB, else the user's data folder).
#pragma once
#include <CLI/CLI.hpp>

namespace mlcli {

// Registers `runs` and its subcommands on app; a failing subcommand prints "error: ..." to
// stderr and sets exitCode to non-zero.
void addRunsCommand(CLI::App& app, int& exitCode);

}  // namespace mlcli

using mlcli::addRunsCommand;

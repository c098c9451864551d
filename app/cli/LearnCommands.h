// Learn mode from a terminal: `learn list`, `learn run LESSON`, `export-code PROJECT`,
// `trace RUN_ID` and `what-if PROJECT|RUN` (always labelled "modelled").
#pragma once
#include <CLI/CLI.hpp>

namespace mlcli {

// Registers `learn` (list, run), `export-code`, `trace` and `what-if` on app; a failing command
// prints "error: ..." to stderr and sets exitCode to non-zero.
void addLearnCommands(CLI::App& app, int& exitCode);

}  // namespace mlcli

// The CLI's subcommands. Each add* registers one subcommand; its callback sets exitCode.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mlcli {

// The exit codes of every command (--help's table, the man page, docs/CLI.md).
inline constexpr int kExitDone = 0;     // the command did what it was asked
inline constexpr int kExitFailed = 1;   // a run failed (diverged, hung, a worker lost, an internal error); no sweep point trained
inline constexpr int kExitRefused = 2;  // refused input or usage; nothing was changed
inline constexpr int kExitInterrupted = 130;  // stopped by Ctrl-C (a run is recorded as cancelled)
inline constexpr const char* kExitStatusHelp =
    "Exit status:\n"
    "  0    done\n"
    "  1    the run failed (diverged, a hang, a lost worker, a store write that failed), or no\n"
    "       point of a sweep trained\n"
    "  2    refused input or usage: a bad option or value, a missing, damaged or foreign file,\n"
    "       NaN weights, an impossible setting; nothing was changed\n"
    "  130  interrupted by Ctrl-C (a training run is recorded as cancelled)";

void addTrainCommand(CLI::App& app, int& exitCode);
void addScaleCommand(CLI::App& app, int& exitCode);
void addSweepCommand(CLI::App& app, int& exitCode);   // sweep (SweepCommand.cpp)
void addModelCommands(CLI::App& app, int& exitCode);  // summary, evaluate, predict, devices
void addExportCommand(CLI::App& app, int& exitCode);  // export --format onnx|torch|keras|keras-weights
void addImportCommand(CLI::App& app, int& exitCode);  // import MODEL.keras (ImportCommand.cpp)

// The process's command line as main() received it (--workers starts it again under mpirun).
const std::vector<std::string>& commandLine();
void setCommandLine(int argc, char** argv);

// Runs f, printing a UserError as "error: ..." and returning kExitRefused (any other exception:
// kExitFailed).
int guarded(const std::function<int()>& f);

}  // namespace mlcli

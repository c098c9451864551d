// The CLI's subcommands. Each add* registers one subcommand; its callback sets exitCode.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace mlcli {

void addTrainCommand(CLI::App& app, int& exitCode);
void addScaleCommand(CLI::App& app, int& exitCode);
void addSweepCommand(CLI::App& app, int& exitCode);   // sweep (SweepCommand.cpp)
void addModelCommands(CLI::App& app, int& exitCode);  // summary, evaluate, predict, devices
void addExportCommand(CLI::App& app, int& exitCode);  // export --format onnx|torch|keras|keras-weights
void addImportCommand(CLI::App& app, int& exitCode);  // import MODEL.keras (ImportCommand.cpp)

// The process's command line as main() received it (--workers starts it again under mpirun).
const std::vector<std::string>& commandLine();
void setCommandLine(int argc, char** argv);

// Runs f, printing a UserError (or any exception) as "error: ..." and returning 1.
int guarded(const std::function<int()>& f);

}  // namespace mlcli

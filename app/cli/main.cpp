// mirrorlab-cli: train, inspect and compare mirrored training runs from a terminal.
#include <cstdio>

#include "Commands.h"
#include "LearnCommands.h"
#include "RunsCommand.h"
#include "project/ScreenWords.h"

int main(int argc, char** argv) {
  // Messages name fields as the studio's screens show them, with the file's key (project/ScreenWords.h).
  ml::setFieldWords(&ml::screenWords());
  mlcli::setCommandLine(argc, argv);
  CLI::App app{"Mirrorlab: synchronous data-parallel (mirrored) training on CPU devices and GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mirrorlab-cli ") + MIRRORLAB_VERSION);
  int exitCode = 0;
  mlcli::addTrainCommand(app, exitCode);
  mlcli::addScaleCommand(app, exitCode);
  mlcli::addSweepCommand(app, exitCode);
  mlcli::addModelCommands(app, exitCode);
  mlcli::addExportCommand(app, exitCode);
  mlcli::addImportCommand(app, exitCode);
  addRunsCommand(app, exitCode);
  mlcli::addLearnCommands(app, exitCode);
  app.footer(mlcli::kExitStatusHelp);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); its own codes (105, 106, 109...) become the table's.
    const int cli11 = app.exit(e);
    return cli11 == 0 ? mlcli::kExitDone : mlcli::kExitRefused;
  }
  return exitCode;
}

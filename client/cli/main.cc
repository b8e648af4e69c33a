// reach: the command-line client of a reach-server.
#include <cstdio>

#include "client/cli/common.h"
#include "version/version.h"

namespace {

constexpr char kFooter[] = R"(Exit codes:
  0  success
  1  the server answered with an error, or could not be reached
  2  bad command line
  3  a file could not be read, imported or written
  4  health: the server is up but not SERVING
  5  stream: frames were answered with errors
  6  solve: the server answered, but a goal was not reached)";

}  // namespace

int main(int argc, char** argv) {
  using namespace reach::cli;
  CLI::App app(
      "reach: register skeletons with a reach-server, solve IK, stream "
      "motion capture and measure the service.");
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", reach::VersionLine("reach"),
                       "Print the version, build type and git commit, and "
                       "exit");
  Globals globals;
  AddGlobalFlags(app, &globals);

  Command run;
  AddRegistryCommands(app, globals, &run);
  AddSolveCommand(app, globals, &run);
  AddStreamCommand(app, globals, &run);
  AddBenchCommand(app, globals, &run);
  AddCharacterizeCommand(app, &run);
  AddRetargetCommand(app, globals, &run);
  AddProfileCommands(app, globals, &run);
  AddVmcCommand(app, globals, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return run ? run() : kExitUsage;
}

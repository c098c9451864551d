// Where the programs find their shipped data (example projects and lessons): the build tree, the
// install prefix, then the XDG data folders. One lookup for the CLI and the studio.
#pragma once
#include <string>
#include <vector>

namespace ml {

// One place that may hold the shipped data, and where its two folders would be.
struct SharedDataDir {
  std::string origin;       // "build tree", "install prefix", "XDG_DATA_HOME", "XDG_DATA_DIRS"
  std::string projectsDir;  // the example projects (*.json)
  std::string lessonsDir;   // the lessons (*.json)
};

// The places, in search order, for a program whose executable lies in exeDir:
//  1. the build tree: exeDir or up to three folders above it holds CMakeCache.txt (the program runs
//     from its build folder); its source folder's projects/ and projects/lessons/;
//  2. the install prefix: exeDir/../share/mirrorlab/{projects,lessons} (relocatable: the prefix is
//     wherever bin/ was copied to, never a path fixed at build time);
//  3. $XDG_DATA_HOME (default ~/.local/share), then each of $XDG_DATA_DIRS (default
//     /usr/local/share:/usr/share), each with mirrorlab/{projects,lessons}.
std::vector<SharedDataDir> sharedDataCandidates(const std::string& exeDir);

// The first candidate whose projects folder exists, for this executable (/proc/self/exe). When none
// exists, origin is empty and projectsDir/lessonsDir name the first candidate (for messages).
SharedDataDir findSharedData();

// Every candidate searched, one per line, for a message that says where nothing was found.
std::string describeSharedDataSearch();

// The folder holding this executable, or "" when /proc/self/exe cannot be read.
std::string executableDir();

// An example project as a menu lists it: its name, or why it cannot be read.
struct ExampleProject {
  std::string path;   // absolute file path
  std::string name;   // the project's "name", or the file name when unreadable
  std::string error;  // empty when the file parses as a project; else the message naming the path
};

// Every *.json directly in dir (not its lessons), sorted by file name, each parsed as a project.
// A damaged file is listed with its error instead of stopping the listing.
std::vector<ExampleProject> listExampleProjects(const std::string& dir);

}  // namespace ml

// A deliberate upward include (nn/ may not know the project file): the layers test checks that
// cmake/CheckLayers.cmake rejects it. Never compiled.
#pragma once
#include "project/Project.h"

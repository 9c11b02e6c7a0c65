// Shim for host emulation (dev/emu): the CUDA runtime API and language are provided by
// dev/emu/emu.h. This directory is first on the include path of the emulation build,
// so the real CUDA headers are never used (and need not be installed).
#pragma once
#define EMU_SHIM_CUDA_RUNTIME 1
#include "../emu.h"

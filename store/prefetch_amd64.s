#include "textflag.h"

// func prefetch(addr uintptr)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func prefetchw(addr uintptr)
TEXT ·prefetchw(SB), NOSPLIT, $0-8
	MOVQ addr+0(FP), AX
	// PREFETCHW (AX), which the Go assembler has no name for: 0F 0D /1.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET

//go:build amd64 && !purego

#include "textflag.h"

// Each kernel computes dst[i] = a[i] OP b[i] over n bytes, n a positive
// multiple of 128, 128 bytes (four YMM registers) per iteration. All loads
// of an iteration precede its stores, so dst may be a or b.
#define KERNEL(NAME, OP) \
TEXT NAME(SB), NOSPLIT, $0-32; \
	MOVQ dst+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	XORQ AX, AX; \
loop: \
	VMOVDQU (SI)(AX*1), Y0; \
	VMOVDQU 32(SI)(AX*1), Y1; \
	VMOVDQU 64(SI)(AX*1), Y2; \
	VMOVDQU 96(SI)(AX*1), Y3; \
	OP (DX)(AX*1), Y0, Y0; \
	OP 32(DX)(AX*1), Y1, Y1; \
	OP 64(DX)(AX*1), Y2, Y2; \
	OP 96(DX)(AX*1), Y3, Y3; \
	VMOVDQU Y0, (DI)(AX*1); \
	VMOVDQU Y1, 32(DI)(AX*1); \
	VMOVDQU Y2, 64(DI)(AX*1); \
	VMOVDQU Y3, 96(DI)(AX*1); \
	ADDQ $128, AX; \
	CMPQ AX, CX; \
	JLT loop; \
	VZEROUPPER; \
	RET

KERNEL(·vaddpd, VADDPD)
KERNEL(·vmulpd, VMULPD)
KERNEL(·vaddps, VADDPS)
KERNEL(·vmulps, VMULPS)
KERNEL(·vpaddq, VPADDQ)
KERNEL(·vpaddd, VPADDD)
KERNEL(·vpaddw, VPADDW)
KERNEL(·vpaddb, VPADDB)
KERNEL(·vpmulld, VPMULLD)
KERNEL(·vpmullw, VPMULLW)
KERNEL(·vpand, VPAND)
KERNEL(·vpor, VPOR)
KERNEL(·vpxor, VPXOR)
KERNEL(·vpminsb, VPMINSB)
KERNEL(·vpminsw, VPMINSW)
KERNEL(·vpminsd, VPMINSD)
KERNEL(·vpminub, VPMINUB)
KERNEL(·vpminuw, VPMINUW)
KERNEL(·vpminud, VPMINUD)
KERNEL(·vpmaxsb, VPMAXSB)
KERNEL(·vpmaxsw, VPMAXSW)
KERNEL(·vpmaxsd, VPMAXSD)
KERNEL(·vpmaxub, VPMAXUB)
KERNEL(·vpmaxuw, VPMAXUW)
KERNEL(·vpmaxud, VPMAXUD)

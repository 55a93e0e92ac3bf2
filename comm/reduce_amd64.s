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

// Float Min and Max with Go's semantics, 32 bytes per iteration. VMAXPD
// alone returns its second operand when either is NaN or both are zero;
// the blends fix that: equal elements (which covers -0 and +0) take
// a AND b for Max (+0 unless both are -0) or a OR b for Min (-0 if either
// is), and a NaN in a wins (a NaN in b already came through).
#define FMINMAX(NAME, OP, CMP, LOGIC, BLEND) \
TEXT NAME(SB), NOSPLIT, $0-32; \
	MOVQ dst+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	XORQ AX, AX; \
loop: \
	VMOVDQU (SI)(AX*1), Y0; \
	VMOVDQU (DX)(AX*1), Y1; \
	OP Y1, Y0, Y2; \
	CMP $0, Y1, Y0, Y3; \
	LOGIC Y1, Y0, Y4; \
	BLEND Y3, Y4, Y2, Y2; \
	CMP $3, Y0, Y0, Y5; \
	BLEND Y5, Y0, Y2, Y2; \
	VMOVDQU Y2, (DI)(AX*1); \
	ADDQ $32, AX; \
	CMPQ AX, CX; \
	JLT loop; \
	VZEROUPPER; \
	RET

FMINMAX(·vmaxpd, VMAXPD, VCMPPD, VANDPD, VBLENDVPD)
FMINMAX(·vminpd, VMINPD, VCMPPD, VORPD, VBLENDVPD)
FMINMAX(·vmaxps, VMAXPS, VCMPPS, VANDPS, VBLENDVPS)
FMINMAX(·vminps, VMINPS, VCMPPS, VORPS, VBLENDVPS)

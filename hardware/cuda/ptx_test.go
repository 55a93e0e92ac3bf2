package cuda_test

// Hand-written PTX kernels for the GPU tests. They target sm_52 with PTX
// ISA 7.0, so any driver from CUDA 11.0 on JIT-compiles them for the GPU
// at hand (sm_90 on an H100).
const testPTX = `
.version 7.0
.target sm_52
.address_size 64

// c[i] = a[i] + b[i] for i < n
.visible .entry vadd(
	.param .u64 vadd_param_a,
	.param .u64 vadd_param_b,
	.param .u64 vadd_param_c,
	.param .u32 vadd_param_n
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [vadd_param_a];
	ld.param.u64 	%rd2, [vadd_param_b];
	ld.param.u64 	%rd3, [vadd_param_c];
	ld.param.u32 	%r2, [vadd_param_n];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r1, %r2;
	@%p1 bra 	VADD_DONE;
	cvta.to.global.u64 	%rd4, %rd1;
	cvta.to.global.u64 	%rd5, %rd2;
	cvta.to.global.u64 	%rd6, %rd3;
	mul.wide.u32 	%rd7, %r1, 4;
	add.s64 	%rd8, %rd4, %rd7;
	add.s64 	%rd9, %rd5, %rd7;
	add.s64 	%rd10, %rd6, %rd7;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd9];
	add.f32 	%f3, %f1, %f2;
	st.global.f32 	[%rd10], %f3;
VADD_DONE:
	ret;
}

// y[i] = a*x[i] + y[i] for i < n (a float and an int parameter)
.visible .entry saxpy(
	.param .f32 saxpy_param_a,
	.param .u64 saxpy_param_x,
	.param .u64 saxpy_param_y,
	.param .u32 saxpy_param_n
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<8>;

	ld.param.f32 	%f1, [saxpy_param_a];
	ld.param.u64 	%rd1, [saxpy_param_x];
	ld.param.u64 	%rd2, [saxpy_param_y];
	ld.param.u32 	%r2, [saxpy_param_n];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	SAXPY_DONE;
	cvta.to.global.u64 	%rd3, %rd1;
	cvta.to.global.u64 	%rd4, %rd2;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd3, %rd5;
	add.s64 	%rd7, %rd4, %rd5;
	ld.global.f32 	%f2, [%rd6];
	ld.global.f32 	%f3, [%rd7];
	fma.rn.f32 	%f4, %f1, %f2, %f3;
	st.global.f32 	[%rd7], %f4;
SAXPY_DONE:
	ret;
}

// Busy-waits for the given number of GPU clock cycles.
.visible .entry spin(
	.param .u64 spin_param_cycles
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [spin_param_cycles];
	mov.u64 	%rd2, %clock64;
SPIN_LOOP:
	mov.u64 	%rd3, %clock64;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	SPIN_LOOP;
	ret;
}

// Does nothing: measures launch overhead.
.visible .entry empty()
{
	ret;
}
`

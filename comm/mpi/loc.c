//go:build mpi

/* MinLoc and MaxLoc on pz's pairs (comm.LocComm): a pair is two int64
 * words, the value's bits in the first (of the type the op is made for),
 * the index in the second. The ops are not commutative: MPI folds in rank
 * order, as comm's fallback does, which matters only for NaNs. */
#include <stdint.h>
#include <string.h>
#include "pz_loc.h"

#define PZ_LOC_FN(NAME, T, CMP)                                                   \
	static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {     \
		(void)dt;                                                         \
		const int64_t *lo = (const int64_t *)in;                          \
		int64_t *hi = (int64_t *)inout;                                   \
		for (int i = 0; i < 2 * *len; i += 2) {                           \
			T acc, v;                                                 \
			memcpy(&acc, &lo[i], sizeof(T));                          \
			memcpy(&v, &hi[i], sizeof(T));                            \
			if (!(v CMP acc) && (v != acc || hi[i + 1] >= lo[i + 1])) { \
				hi[i] = lo[i];                                    \
				hi[i + 1] = lo[i + 1];                            \
			}                                                         \
		}                                                                 \
	}

#define PZ_LOC_PAIR(T, SUFFIX)             \
	PZ_LOC_FN(pz_minloc_##SUFFIX, T, <) \
	PZ_LOC_FN(pz_maxloc_##SUFFIX, T, >)

PZ_LOC_PAIR(int8_t, i8)
PZ_LOC_PAIR(int16_t, i16)
PZ_LOC_PAIR(int32_t, i32)
PZ_LOC_PAIR(int64_t, i64)
PZ_LOC_PAIR(uint8_t, u8)
PZ_LOC_PAIR(uint16_t, u16)
PZ_LOC_PAIR(uint32_t, u32)
PZ_LOC_PAIR(uint64_t, u64)
PZ_LOC_PAIR(float, f32)
PZ_LOC_PAIR(double, f64)

/* Indexed by comm.Datatype - 1 (Int8 .. Float64), then min, max. */
static MPI_User_function *const pz_loc_fns[PZ_LOC_NTYPES][2] = {
	{pz_minloc_i8, pz_maxloc_i8},   {pz_minloc_i16, pz_maxloc_i16}, {pz_minloc_i32, pz_maxloc_i32},
	{pz_minloc_i64, pz_maxloc_i64}, {pz_minloc_u8, pz_maxloc_u8},   {pz_minloc_u16, pz_maxloc_u16},
	{pz_minloc_u32, pz_maxloc_u32}, {pz_minloc_u64, pz_maxloc_u64}, {pz_minloc_f32, pz_maxloc_f32},
	{pz_minloc_f64, pz_maxloc_f64},
};

int pz_loc_init(MPI_Datatype *pair, MPI_Op ops[PZ_LOC_NTYPES][2]) {
	int e = MPI_Type_contiguous(2, MPI_INT64_T, pair);
	if (e != MPI_SUCCESS) return e;
	if ((e = MPI_Type_commit(pair)) != MPI_SUCCESS) return e;
	for (int t = 0; t < PZ_LOC_NTYPES; t++)
		for (int m = 0; m < 2; m++)
			if ((e = MPI_Op_create(pz_loc_fns[t][m], 0, &ops[t][m])) != MPI_SUCCESS) return e;
	return MPI_SUCCESS;
}

void pz_loc_free(MPI_Datatype *pair, MPI_Op ops[PZ_LOC_NTYPES][2]) {
	for (int t = 0; t < PZ_LOC_NTYPES; t++)
		for (int m = 0; m < 2; m++)
			if (ops[t][m] != MPI_OP_NULL) MPI_Op_free(&ops[t][m]);
	if (*pair != MPI_DATATYPE_NULL) MPI_Type_free(pair);
}

void pz_loc_combine(int type, int largest, int64_t *in, int64_t *inout, int len) {
	pz_loc_fns[type][largest != 0](in, inout, &len, NULL);
}

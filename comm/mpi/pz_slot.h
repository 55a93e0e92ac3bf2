/*
 * pz_slot.h - the stall watch's slot around a blocking collective's C call
 * (watch.go's collSlot; comm.go's collSlotU gives its address).
 *
 * pz_slot_set marks collective seq in progress in the slot (slot: the
 * address of a collSlot's seq, or 0 when the watch is off) and
 * pz_slot_clear ends it, with release stores that the watch's atomic
 * loads pair with.
 */
#ifndef PZ_SLOT_H
#define PZ_SLOT_H

#include <stdint.h>

static inline void pz_slot_set(uintptr_t slot, uint64_t seq) {
	if (slot) __atomic_store_n((uint64_t *)slot, seq, __ATOMIC_RELEASE);
}

static inline void pz_slot_clear(uintptr_t slot) {
	if (slot) __atomic_store_n((uint64_t *)slot, 0, __ATOMIC_RELEASE);
}

#endif

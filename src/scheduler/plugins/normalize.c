/* helper.DefaultNormalizeScore: scale to [0, 100] by the maximum, reversed
 * for plugins where less is better. */
#include "scheduler/internal.h"

#include <stddef.h>

void normalize_default(int64_t *scores, size_t n, bool reverse)
{
	int64_t max = 0;
	for (size_t i = 0; i < n; i++)
		if (scores[i] > max)
			max = scores[i];
	if (max == 0) {
		if (reverse)
			for (size_t i = 0; i < n; i++)
				scores[i] = MAX_NODE_SCORE;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		scores[i] = MAX_NODE_SCORE * scores[i] / max;
		if (reverse)
			scores[i] = MAX_NODE_SCORE - scores[i];
	}
}

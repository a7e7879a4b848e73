-- Placeholder so that the numbers run without a gap on the branch h-registry: number 0013
-- belongs to another branch; drop this file when that branch's migration is merged.
SELECT 1;

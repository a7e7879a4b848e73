-- A placeholder on the mirror branch (h-mirror): this schema number belongs to
-- another change being made at the same time, and the migrations must run 1, 2, 3...
-- without a gap. It changes nothing. At the merge the real migration of this number
-- replaces this file (and the mirror migration keeps its own number, 0017).
SELECT 1;

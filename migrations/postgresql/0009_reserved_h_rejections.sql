-- Stand-in for schema version 9, which another branch (h-rejections: columns of the
-- rejections table) defines. The migrations must be numbered without a gap, so this
-- branch carries this empty step; at the merge the real 0009 replaces this file.
SELECT 1;

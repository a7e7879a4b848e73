-- PLACEHOLDER of branch h-webhooks so that its 0012 applies in order: another
-- branch owns this number (0010_placeholder_codepolicy). Delete this file at merge.
SELECT 1;

ALTER TABLE `session_events` ADD `upstream` text;--> statement-breakpoint
ALTER TABLE `session_events` ADD `upstream_subject` text;--> statement-breakpoint
ALTER TABLE `session_events` ADD `upstream_sid` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `upstream_expires_at` integer;
ALTER TABLE `session_events` ADD `assurance_level` integer;--> statement-breakpoint
ALTER TABLE `session_events` ADD `previous_assurance_level` integer;
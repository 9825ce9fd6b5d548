ALTER TABLE `session_events` ADD `report_hash` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_latitude` real;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_longitude` real;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_place_at` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `report_hash` text;
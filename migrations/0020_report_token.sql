ALTER TABLE `session_events` ADD `report_hash` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `report_hash` text;
ALTER TABLE `session_events` ADD `context` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_browser` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_os` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_country` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `seen_asn` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `context_step_up` integer DEFAULT false NOT NULL;